import { afterEach, expect, it } from 'vitest';
import type { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { ClusterWebchatRelay, type RelayedReply } from '../../src/cluster/cluster-webchat.ts';
import { TurnEvents } from '../../src/agent/turn-events.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();

/** A listener that delivers only what the test fires: by default every notification is missed. */
function quietListener() {
  const handlers = new Map<string, ((payload: string) => void)[]>();
  const connects: ((again: boolean) => void)[] = [];
  const listener = {
    listening: true,
    on: (channel: string, h: (payload: string) => void) => { handlers.set(channel, [...(handlers.get(channel) ?? []), h]); },
    onConnect: (h: (again: boolean) => void) => { connects.push(h); },
  } as unknown as ClusterListener;
  return { listener, fire: (channel: string, payload: string) => { for (const h of handlers.get(channel) ?? []) h(payload); }, reconnect: () => { for (const h of connects) h(true); } };
}

let seq = 0;
/** A finished internal message answering into the web chat of `user`, as a replica's `done` leaves it. */
async function finished(user: string, replies: unknown[], over: { correlationId?: string; kind?: string; doneAgoMs?: number } = {}): Promise<void> {
  const n = ++seq;
  const message = { id: `m${n}`, channel: 'internal', internal: { kind: over.kind ?? 'background_auto_continue', sessionKey: `agent:main:direct:${user}`, deliverTo: { channel: 'webchat', accountId: 'default', chatId: user, chatType: 'direct' } } };
  await db.pool.query(
    `INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id, done_at, result)
     VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6::double precision / 1000), $7)`,
    [`agent:main:direct:${user}`, n, `internal:m${n}`, JSON.stringify(message), over.correlationId ?? `c${n}`, over.doneAgoMs ?? 0, JSON.stringify({ replies })],
  );
}

describePg('cluster web chat relay: later replies of other replicas, read from sb_inbox', () => {
  const relays: ClusterWebchatRelay[] = [];
  afterEach(async () => {
    for (const r of relays.splice(0)) r.close();
    await db.pool.query('TRUNCATE sb_inbox, sb_webchat_reply');
  });

  function relay(pollMs: number, events = new TurnEvents(silentLogger()), replicaId = 'relay-test') {
    const quiet = quietListener();
    const r = new ClusterWebchatRelay({ pool: db.pool, listener: quiet.listener, replicaId, logger: silentLogger(), events, pollMs });
    relays.push(r);
    return { relay: r, ...quiet, events };
  }
  const page = (r: ClusterWebchatRelay, user: string) => {
    const got: RelayedReply[] = [];
    const stop = r.subscribe(user, { reply: (p) => got.push(p), close: () => undefined });
    return { got, stop };
  };
  /** The relay's first look-up only learns the database's time (what was done before the page is in its history). */
  const started = (r: ClusterWebchatRelay) => r.lookNow();

  it('with every notification missed, a reply finished after the page opened arrives by the poll, once', async () => {
    const { relay: r } = relay(20);
    const alice = page(r, 'alice');
    const bob = page(r, 'bob');
    await started(r);
    await finished('alice', [{ text: 'batch 2 done', kind: 'reply' }, { text: 'and a note', notice: '⚠', kind: 'notice' }]);
    await until(() => alice.got.length === 2, 'the replies by the poll');
    expect(alice.got.map((p) => [p.text, p.kind])).toEqual([['batch 2 done', 'reply'], ['⚠\n\nand a note', 'notice']]);
    // More look-ups: nothing handed out twice; another user's page gets nothing.
    for (let i = 0; i < 3; i++) await r.lookNow();
    expect(alice.got).toHaveLength(2);
    expect(bob.got).toHaveLength(0);
  });

  it('a reply one replica publishes (its request went away) reaches the user\'s pages on the others once, on sb_webchat, never its own', async () => {
    const here = relay(3_600_000, undefined, 'here');
    const there = relay(3_600_000, undefined, 'there');
    const mine = page(here.relay, 'alice');
    const theirs = page(there.relay, 'alice');
    const other = page(there.relay, 'bob');
    await Promise.all([started(here.relay), started(there.relay)]);
    here.relay.publish('alice', { text: 'the answer', kind: 'reply', files: [
      { name: 'a.txt', mime: 'text/plain', size: 3, sha256: 'ab'.repeat(32) }, { name: 'local.txt', mime: 'text/plain', size: 3 },
    ] });
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_webchat_reply')).rowCount === 1, 'the published row');
    there.fire('sb_webchat', '');
    await until(() => theirs.got.length === 1, 'the reply on the other replica');
    expect(theirs.got[0]).toMatchObject({ text: 'the answer', kind: 'reply', files: [{ name: 'a.txt', mime: 'text/plain', size: 3, sha256: 'ab'.repeat(32) }] });
    for (let i = 0; i < 2; i++) await Promise.all([here.relay.lookNow(), there.relay.lookNow()]);
    expect(theirs.got).toHaveLength(1);
    expect(other.got).toHaveLength(0);
    // The publishing replica's own pages had it from its web chat, not again from the relay.
    expect(mine.got).toHaveLength(0);
  });

  it('sb_done makes the look-up immediate (no poll needed)', async () => {
    const { relay: r, fire } = relay(3_600_000);
    const alice = page(r, 'alice');
    await started(r);
    await finished('alice', [{ text: 'now', kind: 'reply' }]);
    fire('sb_done', JSON.stringify({ key: 'agent:main:direct:alice', seq }));
    await until(() => alice.got.length === 1, 'the reply after sb_done');
    expect(alice.got[0]!.text).toBe('now');
  });

  it('a row committed late (its done_at before the last look-up) is still handed out, within the overlap', async () => {
    const { relay: r } = relay(3_600_000);
    const alice = page(r, 'alice');
    await started(r);
    await r.lookNow();
    await finished('alice', [{ text: 'late commit', kind: 'reply' }], { doneAgoMs: 3000 });
    await r.lookNow();
    expect(alice.got.map((p) => p.text)).toEqual(['late commit']);
  });

  it('after a reconnection of the listener the relay looks at once', async () => {
    const { relay: r, reconnect } = relay(3_600_000);
    const alice = page(r, 'alice');
    await started(r);
    await finished('alice', [{ text: 'while cut', kind: 'reply' }]);
    reconnect();
    await until(() => alice.got.length === 1, 'the reply after the reconnection');
  });

  it('what was done before the page opened, and turns this replica ran itself, are not handed out', async () => {
    const events = new TurnEvents(silentLogger());
    const { relay: r } = relay(3_600_000, events);
    await finished('alice', [{ text: 'before the page', kind: 'reply' }]);
    const alice = page(r, 'alice');
    await started(r);
    events.emit('onTurnStart', { correlationId: 'mine', sessionKey: 'agent:main:direct:alice', sessionId: 's', channel: 'internal', agentId: 'main', at: Date.now() });
    await finished('alice', [{ text: 'ran here', kind: 'reply' }], { correlationId: 'mine' });
    await finished('alice', [{ text: 'ran elsewhere', kind: 'reply' }]);
    await r.lookNow();
    expect(alice.got.map((p) => p.text)).toEqual(['ran elsewhere']);
  });

  it('a quiet heartbeat says nothing; files only on the other replica\'s disk are left out', async () => {
    const { relay: r } = relay(3_600_000);
    const alice = page(r, 'alice');
    await started(r);
    await finished('alice', [{ text: 'HEARTBEAT_OK', kind: 'reply' }], { kind: 'heartbeat' });
    const sha = 'a'.repeat(64);
    await finished('alice', [{ text: 'files', kind: 'reply', files: [{ name: 'a.png', mime: 'image/png', size: 3, sha256: sha, path: '/x/a.png' }, { name: 'b.txt', mime: 'text/plain', size: 1, path: '/x/b.txt' }] }]);
    await r.lookNow();
    expect(alice.got).toHaveLength(1);
    expect(alice.got[0]!.files).toEqual([{ name: 'a.png', mime: 'image/png', size: 3, sha256: sha }]);
  });

  it('no page, no look-ups; closing ends the pages', async () => {
    const { relay: r } = relay(20);
    let closed = 0;
    const stop = r.subscribe('alice', { reply: () => undefined, close: () => { closed++; } });
    stop();
    expect(r.pageCount).toBe(0);
    r.subscribe('alice', { reply: () => undefined, close: () => { closed++; } });
    r.close();
    expect(closed).toBe(1);
  });
});
