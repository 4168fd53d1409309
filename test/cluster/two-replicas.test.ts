import { afterEach, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';

const db = useTestDatabase({ migrate: false });

describePg('cluster mode: two replicas on one database', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
  });

  /** Every reply of every replica, in the order the platform got them. */
  const log: { chatId: string; text: string }[] = [];
  let replicas = 0;
  async function replica(): Promise<{ gw: RunningGateway; channel: TestChannel }> {
    const tmp = tempDir();
    const channel = new TestChannel('telegram');
    const send = channel.send.bind(channel);
    channel.send = async (target, message) => { log.push({ chatId: target.chatId, text: message.text }); await send(target, message); };
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: { store: db.uri, cluster: { pollMs: 100, replicaId: `r${++replicas}` }, channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer' }, agents: { defaults: { tools: { preset: 'none' } } } },
    });
    running.push({ gw, remove: tmp.remove });
    return { gw, channel };
  }

  it('every message is answered once, in each session in the order it was accepted, whichever replica received it', async () => {
    const a = await replica();
    const b = await replica();
    const peers = ['1', '2', '3', '4', '5'];
    const sent: Record<string, string[]> = {};
    for (let i = 0; i < 6; i++) {
      for (const [p, peer] of peers.entries()) {
        const text = `p${peer} m${i}`;
        (sent[peer] ??= []).push(text);
        const via = (i + p) % 2 === 0 ? a : b;
        const submission = await via.channel.inject(text, { peerId: peer, chatId: peer, id: `d-${peer}-${i}` });
        expect(submission.status).toBe('accepted');
      }
    }
    const total = peers.length * 6;
    const replies = () => [...a.channel.sent, ...b.channel.sent];
    for (let i = 0; i < 400 && replies().length < total; i++) await new Promise((r) => setTimeout(r, 25));
    expect(replies()).toHaveLength(total);
    for (const peer of peers) {
      // The offline provider echoes what it was told; per peer, the echoes come in acceptance order, once each.
      const echoed = log.filter((r) => r.chatId === peer).map((r) => /You said: "([^"]+)"/.exec(r.text)?.[1]);
      expect(echoed).toEqual(sent[peer]);
    }
    // One transcript per session in the shared database, each user message in it once, in acceptance order.
    const { rows } = await db.pool.query<{ key: string; content: string }>(`
      SELECT t.session_key AS key, e.entry->>'content' AS content FROM sb_transcript t JOIN sb_transcript_entry e USING (session_id)
      WHERE e.entry->>'role' = 'user' ORDER BY e.n`);
    for (const peer of peers) {
      expect(rows.filter((r) => r.key.endsWith(`:direct:${peer}`)).map((r) => r.content.replace(/^\[[^\]]*\]\s*/, ''))).toEqual(sent[peer]);
    }
    // Every LLM call is one ledger row, whichever replica made it; /usage reads the shared totals on both.
    await Promise.all([a.gw.accounting.flush(), b.gw.accounting.flush()]);
    const ledger = await db.pool.query<{ replica_id: string; n: number }>('SELECT replica_id, count(*)::int AS n FROM sb_ledger GROUP BY replica_id');
    expect(ledger.rows.reduce((n, r) => n + r.n, 0)).toBe(total);
    const usageA = await (await a.gw.app.request('/usage')).json() as unknown;
    const usageB = await (await b.gw.app.request('/usage')).json() as unknown;
    expect(usageA).toEqual(usageB);
    const status = await a.gw.status();
    expect(status.cluster?.replicas.map((r) => (r as { replicaId: string }).replicaId).sort()).toEqual(['r1', 'r2']);
  }, 30_000);

  it('a delivery repeated to the other replica is accepted once', async () => {
    const a = await replica();
    const b = await replica();
    const copies = await Promise.all([a, b, a, b].map((r) => r.channel.inject('hello', { peerId: '9', chatId: '9', id: 'same-update' })));
    expect(copies.filter((s) => s.status === 'accepted')).toHaveLength(1);
    expect(copies.filter((s) => s.status === 'duplicate')).toHaveLength(3);
  }, 30_000);
});

describePg('cluster mode: group context', () => {
  it('group messages skipped on one replica reach the turn the mention starts on another', async () => {
    const made: { gw: RunningGateway; remove: () => void }[] = [];
    // Work the earlier tests left queued would be answered here first.
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery CASCADE');
    try {
      const start = async (id: string) => {
        const tmp = tempDir();
        const channel = new TestChannel('telegram');
        const gw = await startTestGateway({
          dir: tmp.dir, adapters: [channel],
          config: { store: db.uri, cluster: { pollMs: 100, replicaId: id }, channels: { telegram: { groupPolicy: 'open', requireMention: true } }, agents: { defaults: { tools: { preset: 'none' } } } },
        });
        made.push({ gw, remove: tmp.remove });
        return channel;
      };
      const a = await start('g1');
      const b = await start('g2');
      const group = { chatType: 'group' as const, chatId: 'g', groupId: 'g' };
      expect((await a.inject('the meeting moved to 3pm', { ...group, id: 'g-1', peerId: '11', sender: { id: '11', name: 'Ann' } })).status).toBe('skipped');
      expect((await b.inject('what time is the meeting?', { ...group, id: 'g-2', peerId: '12', sender: { id: '12', name: 'Bob' }, mentionsBot: true })).status).toBe('accepted');
      for (let i = 0; i < 400 && a.sent.length + b.sent.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
      const reply = [...a.sent, ...b.sent].map((s) => s.message.text).join('\n');
      expect(reply).toContain('Ann: the meeting moved to 3pm');
    } finally {
      for (const r of made) { await r.gw.stop(); r.remove(); }
    }
  }, 30_000);
});
