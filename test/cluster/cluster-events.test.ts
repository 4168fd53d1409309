import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { ClusterEventBus, MAX_PAYLOAD_BYTES, type ProviderCounters } from '../../src/cluster/cluster-events.ts';
import { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { TurnEvents, type TurnScope } from '../../src/agent/turn-events.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();

const scope = (key: string): TurnScope => ({ correlationId: 'c', sessionKey: key, sessionId: 's', channel: 'telegram', agentId: 'main' });

describePg('sb_events: what a replica tells the others', () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closing.splice(0).reverse()) await c();
  });

  async function replica(id: string, counters: Record<string, ProviderCounters> = {}) {
    const listener = new ClusterListener({ uri: db.uri, logger: silentLogger() });
    await listener.start();
    const events = new TurnEvents(silentLogger());
    const bus = new ClusterEventBus({ pool: db.pool, listener, replicaId: id, logger: silentLogger(), events, localProviders: () => counters, flushMs: 10 });
    closing.push(() => listener.close(), () => bus.close());
    const changes: string[] = [];
    bus.onSessionChange((key) => changes.push(key));
    return { bus, events, changes, counters };
  }

  /** Every sb_events payload, as a third listener hears it. */
  async function tap() {
    const client = new pg.Client({ connectionString: db.uri });
    await client.connect();
    const heard: string[] = [];
    client.on('notification', (n) => heard.push(n.payload ?? ''));
    await client.query('LISTEN sb_events');
    closing.push(() => client.end());
    return heard;
  }

  it('session changes are sent only while another replica watches, deduplicated, and each notification under 8000 bytes', async () => {
    const heard = await tap();
    const a = await replica('a');
    const b = await replica('b');
    b.events.emit('onTurnStart', { ...scope('agent:main:direct:unwatched'), at: 0 });
    // Nobody watches: B sends nothing for it (its own 'h' is all).
    await b.bus.close().then(() => undefined);
    expect(heard.map((p) => JSON.parse(p) as { t: string }).filter((m) => m.t === 's')).toHaveLength(0);
    const c = await replica('c');
    a.bus.watch(true);
    await until(() => heard.some((p) => p.includes('"t":"w"')), 'A says it watches');
    const keys = Array.from({ length: 600 }, (_, i) => `agent:main:telegram:direct:${String(i).padStart(30, '0')}`);
    // C hears A's watch on its own connection; a turn after that is published.
    await until(async () => {
      c.events.emit('onTurnStart', { ...scope(keys[0]!), at: 0 });
      await new Promise((r) => setImmediate(r));
      return a.changes.includes(keys[0]!);
    }, 'C publishes once watched');
    for (const key of keys) {
      c.events.emit('onTurnStart', { ...scope(key), at: 0 });
      c.events.emit('onTurnEnd', { ...scope(key), outcome: 'replied', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, durationMs: 1, at: 0 });
    }
    await until(() => keys.every((k) => a.changes.includes(k)), 'A hears every key');
    const sessions = heard.filter((p) => p.includes('"t":"s"'));
    expect(sessions.length).toBeGreaterThan(1);
    for (const p of sessions) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    // Each key once per gathering, though it started and ended: 600 keys, about 600 entries (plus the probe).
    const entries = sessions.flatMap((p) => (JSON.parse(p) as { s: [string, string][] }).s);
    expect(entries.length).toBeLessThanOrEqual(keys.length + 50);
    // A replica does not hear itself.
    expect(c.changes).toHaveLength(0);
  });

  it('provider failures: absolute counts per replica, resent to a replica that starts listening', async () => {
    const a = await replica('a', { default: { errors: 2, retries: 1, lastError: { code: 'http_500', modelId: 'm', at: '2026-01-01T00:00:00.000Z' } } });
    const b = await replica('b');
    // B's 'h' at start asks; A answers with its counts.
    await until(() => b.bus.remoteProviderCounters().get('default')?.errors === 2, 'B knows A\'s failures');
    a.counters.default = { errors: 3, retries: 1, lastError: { code: 'http_503', modelId: 'm', at: '2026-01-01T00:01:00.000Z' } };
    a.events.emit('onLlmCall', { ...scope('k'), kind: 'turn', providerId: 'default', modelId: 'm', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, isEstimated: false, estimatedInputTokensByComponent: { system: 0, bootstrap: 0, tools: 0, history: 0, toolResults: 0, userInput: 0, images: 0 }, retries: 0, durationMs: 1, error: 'http_503', at: 0 });
    await until(() => b.bus.remoteProviderCounters().get('default')?.errors === 3, 'B gets the new count');
    expect(b.bus.remoteProviderCounters().get('default')).toMatchObject({ errors: 3, retries: 1, lastError: { code: 'http_503' } });
    expect(a.bus.remoteProviderCounters().size).toBe(0);
  });
});
