import { describe, expect, it } from 'vitest';
import { readiness } from '../../src/http/ready-route.ts';

describe('/readyz in cluster mode', () => {
  it('counts a standby channel (another replica holds its lease) as ready, and a starting one as not', async () => {
    const channels = [
      { id: 'telegram', accountId: 'default', status: 'standby' as const, supervision: { state: 'connected', attempts: 1 } },
      { id: 'discord', accountId: 'default', status: 'running' as const },
    ];
    const sources = { pingStore: async () => undefined, channels: () => channels, isClosing: () => false };
    expect(await readiness(sources)).toEqual({ ready: true, failing: [] });
    const starting = [...channels, { id: 'slack', accountId: 'default', status: 'starting' as const }];
    const report = await readiness({ ...sources, channels: () => starting });
    expect(report.ready).toBe(false);
    expect(report.failing.map((f) => f.name)).toEqual(['slack/default']);
  });
});
