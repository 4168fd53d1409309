import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ledgerPath } from '../../src/accounting/accounting.ts';
import { archiveName } from '../../src/accounting/ledger-archive.ts';
import { runMigrate, sessionKeyOfMessage } from '../../src/cli/migrate-command.ts';
import { PgLedgerSink } from '../../src/cluster/pg-ledger-sink.ts';
import { PgTranscriptStore } from '../../src/cluster/pg-transcript-store.ts';
import type { ResolvedConfig } from '../../src/config/resolved.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { StateLockedError } from '../../src/core/errors.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { StateLock } from '../../src/core/state-lock.ts';
import { Inbox } from '../../src/gateway/inbox.ts';
import { PairingStore } from '../../src/routing/pairing.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import { KeyvSessionStore } from '../../src/sessions/store.ts';
import { JsonlTranscriptStore } from '../../src/sessions/transcript.ts';
import { openPairingStore, openSessionStore } from '../../src/stores.ts';
import { record } from '../accounting/records.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase({ migrate: false }); // migrate runs the migrations itself
const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const sink = { write: () => true } as unknown as NodeJS.WritableStream;

const entry = (key: string, sessionId: string): SessionEntry => ({
  key, sessionId, agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct', peerId: key.split(':').pop(), displayName: 'Ada',
  createdAt: T0, updatedAt: T0, sessionStartedAt: T0, state: 'active', runState: 'idle', overrides: {},
  tokens: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }, contextTokens: 0, compactionCount: 0, messageCount: 2,
});

const inbound = (id: string, peerId: string, text = id): InboundMessage => ({
  id, deliveryId: `u${id}`, channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: peerId, peerId,
  sender: { id: peerId, name: 'Ada' }, text, attachments: [], mentionsBot: false, receivedAt: T0, dmScope: 'per-channel-peer',
});

/** Ledger lines r<from>… of one session, as the one-machine ledger writes them. */
const lines = (from: number, n: number) => Array.from({ length: n }, (_, i) => `${JSON.stringify(record({ correlationId: `r${from + i}`, sessionKey: 'agent:main:telegram:direct:1', at: T0 + from + i }))}\n`).join('');

/** A one-machine state folder made by the one-machine code itself, with a torn line in each journal. */
async function oneMachineState(config: ResolvedConfig): Promise<void> {
  const store = await KeyvSessionStore.open(config.store);
  await store.set(entry('agent:main:telegram:direct:1', 'sid-current'));
  await store.set(entry('agent:main:telegram:direct:2', 'sid-two'));
  await store.close();
  const clock = new ManualClock(T0);
  const pairing = new PairingStore({ uri: config.store, clock });
  const asked = await pairing.request('telegram', 'default', '77', 'Bob');
  if (asked.status !== 'created') throw new Error('no code');
  await pairing.request('telegram', 'default', '78');
  await pairing.approve('telegram', asked.request.code);
  await pairing.close();
  const transcripts = new JsonlTranscriptStore({ dir: path.join(config.stateDir, 'agents', 'main', 'sessions'), logger: silentLogger() });
  const at = new Date(T0).toISOString();
  await transcripts.create('sid-old', 'agent:main:telegram:direct:1', new Date(T0));
  await transcripts.append('sid-old', [{ type: 'message', id: 'o1', role: 'user', content: 'before the reset', at }]);
  await transcripts.archive('sid-old', new Date(T0 + 60_000));
  await transcripts.create('sid-current', 'agent:main:telegram:direct:1', new Date(T0));
  await transcripts.append('sid-current', [
    { type: 'message', id: 'c1', role: 'user', content: 'hello', at },
    { type: 'message', id: 'c2', role: 'assistant', content: 'hi', at },
  ]);
  await transcripts.close();
  appendFileSync(transcripts.pathOf('sid-current'), '{"type":"message","id":"c3","role":"us'); // torn by a crash
  // A transcript with no header (its key comes from the entry naming it).
  writeFileSync(transcripts.pathOf('sid-two'), `${JSON.stringify({ type: 'message', id: 't1', role: 'user', content: 'x', at })}\n`);
  const ledger = ledgerPath(config.stateDir);
  mkdirSync(path.dirname(ledger), { recursive: true });
  writeFileSync(path.join(path.dirname(ledger), archiveName(ledger, T0, new Set()).replace(/$/, '.gz')), gzipSync(lines(0, 3)));
  writeFileSync(ledger, `${lines(3, 4)}{"correlationId":"torn`);
  const inbox = new Inbox({ file: path.join(config.stateDir, 'inbox.jsonl'), clock, logger: silentLogger() });
  inbox.open();
  for (const [id, peer] of [['1', '1'], ['2', '1'], ['3', '5'], ['4', '1']] as const) await inbox.accept(inbound(id, peer), `corr-${id}`);
  await inbox.done(inbound('1', '1'));
  await inbox.sent(inbound('2', '1'), 1);
  await inbox.close();
  appendFileSync(path.join(config.stateDir, 'inbox.jsonl'), '{"op":"done","key":"tel');
}

const countRows = async () => {
  const tables = ['keyv', 'sb_transcript', 'sb_transcript_entry', 'sb_ledger', 'sb_inbox', 'sb_lane', 'sb_delivery'];
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}`)).rows[0]!.n);
  return out;
};

describePg('switchboard migrate --to postgres://', () => {
  const tmp = tempDir();
  let config: ResolvedConfig;
  beforeAll(async () => {
    config = testConfig(tmp.dir);
    await oneMachineState(config);
  });
  afterAll(() => tmp.remove());

  it('refuses while a gateway runs on the state folder, naming it; refuses a non-cluster target', async () => {
    const gateway = await StateLock.acquire(config.stateDir, { role: 'gateway', command: 'switchboard start' });
    try {
      const refused = runMigrate({ config, to: db.uri, out: sink });
      await expect(refused).rejects.toBeInstanceOf(StateLockedError);
      await expect(refused).rejects.toThrow(`pid ${process.pid}`);
    } finally {
      await gateway.release();
    }
    await expect(runMigrate({ config, to: 'sqlite://x.sqlite', out: sink })).rejects.toMatchObject({ code: 'MIGRATE_INVALID' });
  });

  it('copies everything once, in the cluster formats; a second run copies nothing', async () => {
    const printed: string[] = [];
    const counts = await runMigrate({ config, to: db.uri, out: { write: (s: string) => printed.push(s) } as unknown as NodeJS.WritableStream });
    expect(counts).toEqual({
      entries: 2, pairing: 2, transcripts: 3, archivedTranscripts: 1, transcriptEntries: 4, ledgerRecords: 7,
      pendingMessages: 3, deliveryIds: 4, skippedLines: 3, skippedTranscripts: 0, skippedMessages: 0,
    });
    expect(printed.join('')).toContain('ledger records        7');
    const after = await countRows();
    expect(after).toMatchObject({ sb_transcript: 3, sb_transcript_entry: 4, sb_ledger: 7, sb_inbox: 3, sb_lane: 2, sb_delivery: 4 });

    // Transcripts: in order, the torn line skipped, the archive archived, the headerless one keyed by its entry.
    const transcripts = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    expect((await transcripts.read('sid-current')).map((e) => e.id)).toEqual(['c1', 'c2']);
    expect(await transcripts.read('sid-old')).toEqual([]);
    expect(await transcripts.exportJsonl('sid-old')).toContain('before the reset');
    expect((await db.pool.query('SELECT archived_at FROM sb_transcript WHERE session_id = $1', ['sid-old'])).rows[0].archived_at).toEqual(new Date(T0 + 60_000));
    expect((await db.pool.query('SELECT session_key FROM sb_transcript WHERE session_id = $1', ['sid-two'])).rows[0].session_key).toBe('agent:main:telegram:direct:2');
    // The ledger: archive then active file, torn line skipped, sums kept.
    const ledger = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'x', startedAt: T0 });
    expect((await ledger.timeline('agent:main:telegram:direct:1', 10)).map((r) => r.correlationId)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
    expect((await ledger.usage()).totals.llmCalls).toBe(7);
    // Pending messages: per key, seq from 1 in acceptance order, replies already sent kept; done ones only deduped.
    const inbox = await db.pool.query('SELECT session_key, seq, delivery_key, correlation_id, sent, message FROM sb_inbox ORDER BY session_key, seq');
    expect(inbox.rows.map((r) => [r.session_key, Number(r.seq), r.delivery_key, r.correlation_id, r.sent])).toEqual([
      ['agent:main:telegram:direct:1', 1, 'telegram:default:u2', 'corr-2', 1],
      ['agent:main:telegram:direct:1', 2, 'telegram:default:u4', 'corr-4', 0],
      ['agent:main:telegram:direct:5', 1, 'telegram:default:u3', 'corr-3', 0],
    ]);
    expect(inbox.rows[0].message.text).toBe('2');
    const lanes = await db.pool.query('SELECT session_key, next_seq, done_seq FROM sb_lane ORDER BY session_key');
    expect(lanes.rows.map((r) => [r.session_key, Number(r.next_seq), Number(r.done_seq)])).toEqual([['agent:main:telegram:direct:1', 2, 0], ['agent:main:telegram:direct:5', 1, 0]]);
    expect((await db.pool.query("SELECT outcome FROM sb_delivery WHERE delivery_key = 'telegram:default:u1'")).rows).toEqual([{ outcome: 'accepted' }]);
    // Entries and pairing are readable by the cluster stores.
    const store = await openSessionStore(db.uri, { pool: db.pool });
    expect((await store.get('agent:main:telegram:direct:1'))?.sessionId).toBe('sid-current');
    const pairing = openPairingStore(db.uri, { clock: new ManualClock(T0), pool: db.pool });
    expect(await pairing.isPaired('telegram', '77')).toBe(true);
    expect((await pairing.pending('telegram')).map((p) => p.peerId)).toEqual(['78']);

    // Running it again copies nothing and changes no row; a ledger record appended since is the only news.
    const again = await runMigrate({ config, to: db.uri, out: sink });
    expect(again).toMatchObject({ entries: 0, pairing: 0, transcripts: 0, transcriptEntries: 0, ledgerRecords: 0, pendingMessages: 0, deliveryIds: 0 });
    expect(await countRows()).toEqual(after);
    writeFileSync(ledgerPath(config.stateDir), lines(3, 5));
    expect((await runMigrate({ config, to: db.uri, out: sink })).ledgerRecords).toBe(1);
  });

  it('builds pending messages\' keys as the gateway does (bindings, dmScope, internal keys)', () => {
    const routed = testConfig(tmp.dir, { agents: { list: [{ id: 'main' }, { id: 'ops' }] }, bindings: [{ agentId: 'ops', match: { channel: 'slack' } }] });
    expect(sessionKeyOfMessage(routed, { ...inbound('1', '9'), dmScope: undefined })).toBe('agent:main:main');
    expect(sessionKeyOfMessage(routed, { ...inbound('1', '9'), channel: 'slack' })).toBe('agent:ops:slack:direct:9');
    expect(sessionKeyOfMessage(routed, { ...inbound('1', '9'), channel: 'internal', internal: { sessionKey: 'agent:ops:subagent:abc' } } as InboundMessage)).toBe('agent:ops:subagent:abc');
  });
});
