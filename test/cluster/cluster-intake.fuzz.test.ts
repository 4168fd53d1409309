import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { jsonbText } from '../../src/cluster/jsonb.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';

const db = useTestDatabase();

/** Strings as platforms and models can send them: any UTF-16 units, NUL and unpaired surrogates included. */
const hostile = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.string({ unit: fc.constantFrom('\u0000', '\ud800', '\udfff', '\ud83d', '\ude00', 'a', ' ', '\\', '"', 'u', '0'), maxLength: 60 }),
  fc.constant('\\u0000 literal backslash-u, then a real NUL: \u0000'),
);

describePg('cluster intake, fuzzed', () => {
  let gw: RunningGateway;
  let channel: TestChannel;
  let remove: () => void;
  beforeAll(async () => {
    const tmp = tempDir();
    remove = tmp.remove;
    channel = new TestChannel('telegram');
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: { store: db.uri, cluster: { pollMs: 100, replicaId: 'fuzz' }, channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer' }, agents: { defaults: { tools: { preset: 'none' } } } },
    });
  });
  afterAll(async () => { await gw.stop(); remove(); });

  it('jsonb takes every value jsonbText writes, and strings without NUL or unpaired surrogates come back unchanged', async () => {
    await fc.assert(fc.asyncProperty(hostile, async (text) => {
      const { rows } = await db.pool.query<{ v: { text: string } }>('SELECT $1::jsonb AS v', [jsonbText({ text })]);
      const clean = !/[\u0000\ud800-\udfff]/.test(text);
      if (clean) expect(rows[0]!.v.text).toBe(text);
      else expect(rows[0]!.v.text).toHaveLength(text.length);
    }), { numRuns: 300 });
  });

  it('300 generated messages (hostile text, names and ids): each is accepted or refused, none throws, every accepted one is answered', async () => {
    const cases = fc.sample(fc.record({ text: hostile, name: hostile, id: hostile, peer: fc.oneof(fc.constantFrom('1', '2', '3'), hostile.filter((p) => p.length > 0)) }), { numRuns: 300, seed: 18 });
    let accepted = 0;
    for (const [i, c] of cases.entries()) {
      const submission = await channel.inject(c.text, { id: `${i}:${c.id}`, peerId: c.peer, chatId: c.peer, sender: { id: c.peer, name: c.name } });
      expect(['accepted', 'duplicate', 'blocked', 'skipped']).toContain(submission.status);
      if (submission.status === 'accepted') accepted++;
    }
    expect(accepted).toBeGreaterThan(200);
    for (let i = 0; i < 600 && channel.sent.length < accepted; i++) await new Promise((r) => setTimeout(r, 25));
    expect(channel.sent.length).toBe(accepted);
    // A message is marked done after its reply went out (SPEC §13), so the last marks may trail the last reply a little.
    const unfinished = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM sb_lane WHERE next_seq > done_seq')).rows[0]!.n;
    for (let i = 0; i < 200 && (await unfinished()) > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(await unfinished()).toBe(0);
  }, 60_000);
});
