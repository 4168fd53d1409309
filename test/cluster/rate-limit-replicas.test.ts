import { afterEach, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';

const db = useTestDatabase({ migrate: false });

// SPEC §14 in cluster mode: a sender cannot multiply limits.perSender by the number of replicas.
describePg('cluster mode: one rate-limit bucket per sender across replicas (issue 31)', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
  });
  let n = 0;
  async function replica(): Promise<TestChannel> {
    const tmp = tempDir();
    const channel = new TestChannel('telegram');
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: {
        store: db.uri, cluster: { pollMs: 100, replicaId: `rl${++n}` }, channels: { telegram: { dmPolicy: 'open' } },
        limits: { perSender: { perMinute: 1, burst: 3 } }, agents: { defaults: { tools: { preset: 'none' } } },
      },
    });
    running.push({ gw, remove: tmp.remove });
    return channel;
  }

  it('three messages of the burst are accepted in all, whichever replica each reaches', async () => {
    const [a, b] = [await replica(), await replica()];
    const statuses: string[] = [];
    for (let i = 0; i < 6; i++) {
      const channel = i % 2 === 0 ? a : b;
      statuses.push((await channel.inject(`hello ${i}`, { peerId: '31', chatId: '31', id: `rl-${i}` })).status);
    }
    expect(statuses).toEqual(['accepted', 'accepted', 'accepted', 'rate_limited', 'rate_limited', 'rate_limited']);
  }, 30_000);
});
