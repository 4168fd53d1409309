import { afterEach, beforeEach, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { capturingLogger, type LogLine } from '../helpers/log-capture.ts';
import { userText } from '../fakes/fake-openai.ts';
import { useFakeOpenAI } from '../helpers/fixtures.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const [A, C, P] = ['agent:main:direct:a', 'agent:main:direct:c', 'agent:main:direct:p'];
const links = (identityLinks: Record<string, string[]>) => ({ session: { dmScope: 'per-peer', reset: { mode: 'off' }, identityLinks } });
const before = links({ a: ['webchat:ann'], c: ['webchat:bob'] });
const swapped = links({ a: ['webchat:bob'], c: ['webchat:ann'] });
const merged = links({ p: ['webchat:ann', 'webchat:bob'] });

describePg('cluster mode: re-keying at start, once, under a database lock (SPEC §12, §13)', () => {
  const fake = useFakeOpenAI((r) => ({ content: `answers ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  beforeEach(async () => {
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery, sb_transcript, sb_transcript_entry, sb_replica, sb_routing, sb_rekey_archive, sb_group_context, keyv CASCADE');
  });
  afterEach(async () => { await stopAll(); });
  const stopAll = async () => { for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); } };

  let n = 0;
  const start = async (config: Record<string, unknown>, options: { logger?: Logger; afterStep?: (step: string) => void } = {}) => {
    const tmp = tempDir();
    try {
      const gw = await startGateway({
        config: testConfig(tmp.dir, {
          store: db.uri, cluster: { pollMs: 100, replicaId: `k${++n}` },
          providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
          agents: { defaults: { tools: { preset: 'none' } } }, ...config,
        }),
        logger: options.logger ?? silentLogger(), rekeyHooks: { afterStep: options.afterStep },
      });
      running.push({ gw, remove: tmp.remove });
      return gw;
    } catch (error) {
      tmp.remove();
      throw error;
    }
  };
  const say = async (gw: RunningGateway, user: string, text: string) => {
    const res = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    expect(res.status).toBe(200);
  };
  const entries = async () => (await db.pool.query<{ key: string; value: string }>(`SELECT key, value FROM keyv WHERE key LIKE 'sessions:%' ORDER BY key`)).rows
    .map((r) => (JSON.parse(r.value) as { value: { key: string; sessionId: string } }).value).map((e) => [e.key, e.sessionId]);
  const history = async (sessionId: string) => (await db.pool.query<{ entry: TranscriptMessage }>(
    `SELECT e.entry FROM sb_transcript_entry e JOIN sb_transcript t USING (session_id) WHERE session_id = $1 AND t.archived_at IS NULL ORDER BY e.n`, [sessionId])).rows
    .map((r) => r.entry).filter((e) => e.role === 'user' || e.role === 'assistant').map((e) => e.content);
  const transcript = async (sessionId: string) => (await db.pool.query<{ session_key: string; former_keys: string[]; archived: boolean }>(
    'SELECT session_key, former_keys, archived_at IS NOT NULL AS archived FROM sb_transcript WHERE session_id = $1', [sessionId])).rows[0];
  const rekeyLines = (lines: LogLine[]) => lines.filter((l) => l.msg.startsWith('session re-keyed') || l.msg.startsWith('session merged'));

  /** Two conversations, ann's under `a` and bob's under `c`; returns their session ids. */
  async function seed(): Promise<{ ann: string; bob: string }> {
    const gw = await start(before);
    await say(gw, 'ann', 'ann one');
    await say(gw, 'bob', 'bob one');
    const ids = Object.fromEntries(await entries()) as Record<string, string>;
    await stopAll();
    return { ann: ids[A]!, bob: ids[C]! };
  }

  it('swapped identity links, two replicas starting together: the conversations swap keys once, with their transcripts', async () => {
    const { ann, bob } = await seed();
    const logs = [capturingLogger('info'), capturingLogger('info')];
    const [one] = await Promise.all(logs.map((l) => start(swapped, { logger: l.logger })));
    expect(await entries()).toEqual([[A, bob], [C, ann]]);
    // A cycle: one move to a temporary key, two to the final keys; made by one replica only.
    expect(logs.map((l) => rekeyLines(l.lines).length).sort()).toEqual([0, 3]);
    expect(await transcript(ann)).toEqual({ session_key: C, former_keys: [A], archived: false });
    expect(await transcript(bob)).toEqual({ session_key: A, former_keys: [C], archived: false });
    await say(one!, 'ann', 'ann two');
    expect(await history(ann)).toEqual(['ann one', 'answers ann one', 'ann two', 'answers ann two']);
    expect(await history(bob)).toEqual(['bob one', 'answers bob one']);
    // A later start with the same routing moves nothing.
    await stopAll();
    const again = capturingLogger('info');
    await start(swapped, { logger: again.logger });
    expect(rekeyLines(again.lines)).toEqual([]);
    expect(await entries()).toEqual([[A, bob], [C, ann]]);
  }, 60_000);

  it('linked into one person: the more recently active conversation continues, the other is archived (entry kept, transcript archived)', async () => {
    const { ann, bob } = await seed();
    await start(merged);
    expect(await entries()).toEqual([[P, bob]]);
    expect(await transcript(bob)).toEqual({ session_key: P, former_keys: [C], archived: false });
    expect((await transcript(ann))?.archived).toBe(true);
    const archive = await db.pool.query<{ session_key: string; merged_into: string; entry: { sessionId: string } }>('SELECT session_key, merged_into, entry FROM sb_rekey_archive');
    expect(archive.rows.map((r) => [r.session_key, r.merged_into, r.entry.sessionId])).toEqual([[A, P, ann]]);
  }, 60_000);

  it('a re-key killed at any step leaves nothing done; the next start does it all, nothing twice', async () => {
    const steps: string[] = [];
    await seed();
    await start(swapped, { afterStep: (s) => steps.push(s) });
    await stopAll();
    expect(steps.length).toBeGreaterThan(6);
    const general = (s: string) => s.replace(/rekey-[0-9a-f-]+/, 'rekey-*');
    for (const [i, step] of steps.map(general).entries()) {
      await db.pool.query('TRUNCATE sb_transcript, sb_transcript_entry, sb_routing, sb_rekey_archive, keyv CASCADE');
      const ids = await seed();
      const seeded = await entries();
      await expect(start(swapped, { afterStep: (s) => { if (general(s) === step) throw new Error('killed'); } })).rejects.toThrow('killed');
      expect([i, await entries()]).toEqual([i, seeded]);
      await start(swapped);
      expect([step, await entries()]).toEqual([step, [[A, ids.bob], [C, ids.ann]]]);
      expect([step, await transcript(ids.ann)]).toEqual([step, { session_key: C, former_keys: [A], archived: false }]);
      expect([step, await history(ids.ann)]).toEqual([step, ['ann one', 'answers ann one']]);
      await stopAll();
    }
  }, 180_000);

  it('a session with messages queued under its old key defers the re-key to a later start', async () => {
    const { ann, bob } = await seed();
    await db.pool.query(`INSERT INTO sb_lane (session_key, next_seq, done_seq) VALUES ($1, 2, 1)`, [A]);
    const fingerprint = async () => (await db.pool.query<{ fingerprint: string }>('SELECT fingerprint FROM sb_routing')).rows[0]?.fingerprint;
    const seeded = await fingerprint();
    const logs = capturingLogger('info');
    await start(swapped, { logger: logs.logger });
    expect(await entries()).toEqual([[A, ann], [C, bob]]);
    expect(logs.lines.some((l) => l.msg.includes('re-keying is left to a later start'))).toBe(true);
    expect(await fingerprint()).toBe(seeded);
    await stopAll();
    await db.pool.query('UPDATE sb_lane SET done_seq = 2 WHERE session_key = $1', [A]);
    await start(swapped);
    expect(await entries()).toEqual([[A, bob], [C, ann]]);
  }, 60_000);
});

