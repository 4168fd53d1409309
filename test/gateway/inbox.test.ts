import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { deliveryKey, Inbox, type InboxOptions } from '../../src/gateway/inbox.ts';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 2, 1);

const dirs: string[] = [];
const inboxes: Inbox[] = [];
afterEach(async () => {
  for (const i of inboxes.splice(0)) await i.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-inbox-'));
  dirs.push(dir);
  const file = path.join(dir, 'state', 'inbox.jsonl');
  const clock = new ManualClock(T0);
  const warnings: unknown[][] = [];
  const logger = { warn: (...args: unknown[]) => warnings.push(args) } as unknown as Logger;
  const open = (over: Partial<InboxOptions> = {}) => {
    const inbox = new Inbox({ file, clock, logger, ...over });
    inboxes.push(inbox);
    return { inbox, pending: inbox.open() };
  };
  const lines = () => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { file, clock, warnings, open, lines };
}

const msg = (over: Partial<InboundMessage> = {}): InboundMessage => ({
  id: '-100:5', deliveryId: '9001', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42',
  sender: { id: '42' }, text: 'hello', attachments: [], mentionsBot: false, receivedAt: T0, ...over,
});

describe('deliveryKey', () => {
  it('is channel:account:delivery id, else the message id', () => {
    expect(deliveryKey(msg())).toBe('telegram:default:9001');
    expect(deliveryKey(msg({ deliveryId: undefined }))).toBe('telegram:default:-100:5');
    expect(deliveryKey(msg({ channel: 'slack', accountId: 'work', deliveryId: 'Ev1' }))).toBe('slack:work:Ev1');
  });
});

describe('Inbox: dedupe', () => {
  it('the same delivery id on two accounts (or channels) is two deliveries', () => {
    const { open } = setup();
    const { inbox } = open();
    expect(inbox.claim(msg())).toBe(true);
    expect(inbox.claim(msg({ accountId: 'second' }))).toBe(true);
    expect(inbox.claim(msg({ channel: 'discord' }))).toBe(true);
    expect(inbox.claim(msg())).toBe(false);
    expect(inbox.claim(msg({ accountId: 'second' }))).toBe(false);
  });

  it('a redelivery under the same delivery id but another message id is a duplicate; without delivery ids the message id decides', () => {
    const { open } = setup();
    const { inbox } = open();
    inbox.markSeen(msg());
    expect(inbox.has(msg({ id: 'other' }))).toBe(true);
    expect(inbox.has(msg({ deliveryId: '9002' }))).toBe(false);
    inbox.markSeen(msg({ deliveryId: undefined, id: 'm1' }));
    expect(inbox.has(msg({ deliveryId: undefined, id: 'm1' }))).toBe(true);
    expect(inbox.has(msg({ deliveryId: undefined, id: 'm2' }))).toBe(false);
  });

  it('a claim is given back by unclaim, and taken over by accept', async () => {
    const { open } = setup();
    const { inbox } = open();
    expect(inbox.claim(msg())).toBe(true);
    expect(inbox.has(msg())).toBe(true);
    inbox.unclaim(msg());
    expect(inbox.has(msg())).toBe(false);
    expect(inbox.claim(msg())).toBe(true);
    await inbox.accept(msg(), 'corr-1');
    expect(inbox.pendingCount).toBe(1);
    inbox.unclaim(msg()); // too late: the message is accepted
    expect(inbox.has(msg())).toBe(true);
  });

  it('a delivery answered before a restart is still a duplicate after it', async () => {
    const { open } = setup();
    const first = open().inbox;
    await first.accept(msg(), 'corr-1');
    await first.done(msg());
    await first.close();
    const { inbox, pending } = open();
    expect(pending).toEqual([]);
    expect(inbox.has(msg())).toBe(true);
    expect(inbox.has(msg({ deliveryId: '9002' }))).toBe(false);
  });

  it('a refused delivery (rate limit) is remembered across a restart, and nothing is replayed for it', async () => {
    const { open } = setup();
    const first = open().inbox;
    await first.refuse(msg());
    await first.close();
    const { inbox, pending } = open();
    expect(pending).toEqual([]);
    expect(inbox.has(msg())).toBe(true);
  });

  it('markSeen alone (non-durable channels) is not written: forgotten at a restart', async () => {
    const { open } = setup();
    const first = open().inbox;
    first.markSeen(msg());
    await first.close();
    expect(open().inbox.has(msg())).toBe(false);
  });
});

describe('Inbox: replay', () => {
  it('a message accepted and not done is replayed once at the next start, without its raw event, with its correlation id', async () => {
    const { open } = setup();
    const first = open().inbox;
    await first.accept(msg({ raw: { secret: 'event' } }), 'corr-1');
    await first.accept(msg({ deliveryId: '9002', id: '-100:6', text: 'second' }), 'corr-2');
    await first.done(msg({ deliveryId: '9002', id: '-100:6' }));
    await first.close();
    const { inbox, pending } = open();
    expect(pending).toEqual([{ message: msg(), correlationId: 'corr-1' }]);
    expect(pending[0]!.message).not.toHaveProperty('raw');
    expect(inbox.pendingCount).toBe(1);
    expect(inbox.has(msg())).toBe(true);
  });

  it('replies the platform accepted are counted (the highest count wins) and kept across two restarts', async () => {
    const { open, file } = setup();
    const first = open().inbox;
    await first.accept(msg(), 'corr-1');
    await first.sent(msg(), 2);
    await first.sent(msg(), 1);
    const linesBefore = readFileSync(file, 'utf8');
    await first.sent(msg({ deliveryId: 'unknown' }), 5); // not pending: ignored, not even written
    expect(readFileSync(file, 'utf8')).toBe(linesBefore);
    await first.close();
    const second = open();
    expect(second.pending).toEqual([{ message: msg(), correlationId: 'corr-1', sent: 2 }]);
    await second.inbox.close();
    expect(open().pending).toEqual([{ message: msg(), correlationId: 'corr-1', sent: 2 }]);
  });
});

describe('Inbox: the journal file', () => {
  it('is created with its folder on open; empty when there is nothing to remember', () => {
    const { open, file } = setup();
    open();
    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('');
  });

  it('compaction at start keeps pending messages and delivery ids, drops done messages, across two restarts', async () => {
    const { open, lines, clock } = setup();
    const first = open().inbox;
    await first.accept(msg(), 'corr-1');
    clock.advance(1000);
    await first.accept(msg({ deliveryId: '9002', id: '-100:6' }), 'corr-2');
    await first.done(msg({ deliveryId: '9002', id: '-100:6' }));
    await first.refuse(msg({ deliveryId: '9003', id: '-100:7' }));
    expect(lines().map((l) => l.op)).toEqual(['in', 'in', 'done', 'seen']);
    await first.close();

    open();
    const compacted = lines();
    expect(compacted).toEqual([
      { op: 'seen', key: 'telegram:default:9002', at: T0 + 1000 },
      { op: 'seen', key: 'telegram:default:9003', at: T0 + 1000 },
      { op: 'in', key: 'telegram:default:9001', at: T0, message: msg(), correlationId: 'corr-1' },
    ]);
    await inboxes.at(-1)!.close();

    const third = open();
    expect(lines()).toEqual(compacted);
    expect(third.pending).toEqual([{ message: msg(), correlationId: 'corr-1' }]);
    for (const id of ['9001', '9002', '9003']) expect(third.inbox.has(msg({ deliveryId: id }))).toBe(true);
    expect(third.inbox.has(msg({ deliveryId: '9004' }))).toBe(false);
  });

  it('delivery ids older than the dedupe window (48 h) are forgotten at start; younger ones kept', async () => {
    const { open, clock } = setup();
    const first = open().inbox;
    await first.done(msg({ deliveryId: 'old' }));
    clock.advance(HOUR);
    await first.done(msg({ deliveryId: 'young' }));
    await first.close();
    clock.set(T0 + 48 * HOUR);
    let reopened = open().inbox;
    expect(reopened.has(msg({ deliveryId: 'old' }))).toBe(true); // exactly 48 h: still inside
    await reopened.close();
    clock.set(T0 + 48 * HOUR + 1);
    reopened = open().inbox;
    expect(reopened.has(msg({ deliveryId: 'old' }))).toBe(false);
    expect(reopened.has(msg({ deliveryId: 'young' }))).toBe(true);
  });

  it('the dedupe window and the number of ids remembered are settable', async () => {
    const { open, clock } = setup();
    const { inbox } = open({ dedupeWindowMs: 1000, maxSeen: 2 });
    for (const id of ['a', 'b', 'c']) await inbox.done(msg({ deliveryId: id }));
    expect(['a', 'b', 'c'].map((id) => inbox.has(msg({ deliveryId: id })))).toEqual([false, true, true]);
    clock.advance(1001);
    await inbox.done(msg({ deliveryId: 'd' }));
    expect(['b', 'c', 'd'].map((id) => inbox.has(msg({ deliveryId: id })))).toEqual([false, false, true]);
  });

  it('the journal is compacted while running after 20,000 answered messages, and keeps what it must', async () => {
    const { open, lines } = setup();
    const { inbox } = open({ maxSeen: 5 });
    await inbox.accept(msg({ deliveryId: 'waiting' }), 'corr-w');
    for (let i = 0; i < 20_000; i++) await inbox.done(msg({ deliveryId: `d${i}` }));
    expect(lines()).toHaveLength(20_001);
    await inbox.done(msg({ deliveryId: 'last' }));
    const after = lines();
    expect(after.filter((l) => l.op === 'seen').map((l) => l.key)).toEqual(['d19996', 'd19997', 'd19998', 'd19999', 'last'].map((d) => `telegram:default:${d}`));
    expect(after.filter((l) => l.op === 'in').map((l) => l.key)).toEqual(['telegram:default:waiting']);
    await inbox.done(msg({ deliveryId: 'after' }));
    expect(lines()).toHaveLength(after.length + 1);
  });

  it('blank lines are skipped silently, a torn line followed only by blank lines too', async () => {
    const { open, file, warnings } = setup();
    const first = open().inbox;
    await first.accept(msg(), 'corr-1');
    await first.close();
    const journal = readFileSync(file, 'utf8');
    writeFileSync(file, `\n${journal}\n  \n{"op":"done","key":"telegram:def\n\n`);
    expect(open().pending).toHaveLength(1);
    expect(warnings).toEqual([]);
  });

  it('a sent count for a message not in the journal is ignored at start', () => {
    const { open, file } = setup();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify({ op: 'sent', key: 'telegram:default:1', at: T0, count: 2 })}\n`);
    expect(open().pending).toEqual([]);
  });

  it('a torn last line (a crash mid-write) is skipped silently; an unreadable line in the middle is logged', async () => {
    const { open, file, warnings } = setup();
    const first = open().inbox;
    await first.accept(msg(), 'corr-1');
    await first.close();
    appendFileSync(file, '{"op":"done","key":"telegram:def');
    expect(open().pending).toHaveLength(1);
    expect(warnings).toEqual([]);
    await inboxes.at(-1)!.close();

    writeFileSync(file, `not json\n${readFileSync(file, 'utf8')}\n\n`);
    expect(open().pending).toHaveLength(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toEqual([{ file, line: 1 }, 'inbox: skipped an unreadable line']);
  });
});
