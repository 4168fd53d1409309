import { afterEach, expect, it } from 'vitest';
import type { PgWorkQueue } from '../../src/cluster/pg-work-queue.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

/** The user messages of a session as `GET /admin/sessions/:key/history` of one replica shows them. */
async function userMessages(gw: RunningGateway, key: string): Promise<string[]> {
  const res = await fetch(`${gw.url}/admin/sessions/${encodeURIComponent(key)}/history`);
  const body = await res.json() as { entries: { type: string; role?: string; content?: string }[] };
  if (!body.entries) throw new Error(`history of ${key}: ${res.status} ${JSON.stringify(body)}`);
  return body.entries.filter((e) => e.type === 'message' && e.role === 'user').map((e) => (e.content ?? '').replace(/^\[[^\]]*\]\s*/, ''));
}

describePg('cluster mode: history read on a replica that no longer runs the session (issue 31)', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
  });
  let replicas = 0;
  async function replica(): Promise<{ gw: RunningGateway; channel: TestChannel }> {
    const tmp = tempDir();
    const channel = new TestChannel('telegram');
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: { store: db.uri, cluster: { pollMs: 100, replicaId: `h${++replicas}` }, channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer' }, agents: { defaults: { tools: { preset: 'none' } } } },
    });
    running.push({ gw, remove: tmp.remove });
    return { gw, channel };
  }

  it('after every reply was sent, each live replica\'s history route shows every committed entry', async () => {
    const a = await replica();
    const b = await replica();
    await a.channel.inject('m1', { peerId: '7', chatId: '7', id: 'h-1' });
    const replies = () => a.channel.sent.length + b.channel.sent.length;
    await until(() => replies() >= 1, 'the first reply');
    const key = await until(async () => (await db.pool.query<{ key: string }>('SELECT session_key AS key FROM sb_transcript')).rows[0]?.key, 'the transcript');
    // Replica A reads (and caches) the history after the first message.
    expect(await userMessages(a.gw, key)).toEqual(['m1']);
    // A stops claiming work (it stays live and serves reads); B runs the next seven messages.
    (a.gw.gateway as unknown as { options: { queue: PgWorkQueue } }).options.queue.close();
    for (let i = 2; i <= 8; i++) {
      await b.channel.inject(`m${i}`, { peerId: '7', chatId: '7', id: `h-${i}` });
      await until(() => replies() >= i, `reply ${i}`);
    }
    const all = ['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8'];
    const stored = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM sb_transcript_entry WHERE entry->>'role' = 'user'");
    expect(stored.rows[0]!.n).toBe(8);
    expect(await userMessages(b.gw, key)).toEqual(all);
    expect(await userMessages(a.gw, key)).toEqual(all);
    // B resets the session: A's cached entry still names the old session id, but A reads the stored one.
    await b.channel.inject('/new after reset', { peerId: '7', chatId: '7', id: 'h-9' });
    await until(() => replies() >= 9, 'the reset\'s reply');
    expect(await userMessages(b.gw, key)).toEqual(['after reset']);
    expect(await userMessages(a.gw, key)).toEqual(['after reset']);
  }, 30_000);
});
