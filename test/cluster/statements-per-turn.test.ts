// Issue 31: PostgreSQL work per turn. One replica in-process behind a proxy that counts every statement of every
// connection (pool, lane connections, listener, keyv); sessions at steady state (each already ran a turn) send a
// message after each reply, as people do. Before issue 31 a turn cost 20–43 transactions (32 statements in the
// cluster bench): a poll per waiting message, two looks at the next message, separate sent marks and notification.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StatementCounter, type StatementTally } from '../../bench/cluster/statement-counter.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';

const db = useTestDatabase({ migrate: false });

/** The goal of issue 31: statements per turn at steady state, everything included. */
const GOAL = 8;
/**
 * The work queue's own share (intake, lock with the next message, reply mark, done mark with the unlock, polls and
 * heartbeats): 4.1 (5.4 before the done mark gave the lock back itself).
 */
const QUEUE_BUDGET = 5;
const QUEUE_SQL = /sb_lane|sb_inbox|sb_delivery|advisory|^SELECT 1$|pg_notify/;

describePg('PostgreSQL statements per turn (one replica, steady state)', () => {
  let counter: StatementCounter;
  let gw: RunningGateway;
  let remove: () => void;
  const channel = new TestChannel('telegram');
  const sessions = 4;
  const turnsPerSession = 8;
  let tally: StatementTally;
  /** The sessions' first turns (a new entry and transcript each). */
  let firstTally: StatementTally;
  let turns = 0;

  beforeAll(async () => {
    counter = await StatementCounter.start(db.uri);
    const tmp = tempDir();
    remove = tmp.remove;
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: {
        store: counter.uri(db.uri), cluster: { pollMs: 1000, replicaId: 'counted' },
        channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } }, agents: { defaults: { tools: { preset: 'none' } } },
      },
    });
    let replies = 0;
    const converse = async (rounds: number) => {
      await Promise.all(Array.from({ length: sessions }, async (_, s) => {
        for (let i = 0; i < rounds; i++) {
          const before = channel.sent.length;
          await channel.inject(`s${s} m${i}`, { peerId: `p${s}`, chatId: `p${s}` });
          await waitFor(() => channel.sent.slice(before).some((r) => r.target.chatId === `p${s}`));
        }
      }));
      replies += sessions * rounds;
    };
    // Warm-up: every session runs a turn (entry, transcript, lane rows exist), the ledger writer ran once.
    counter.reset();
    await converse(1);
    await gw.accounting.flush();
    firstTally = counter.tally();
    counter.reset();
    await converse(turnsPerSession);
    await gw.accounting.flush();
    tally = counter.tally();
    turns = sessions * turnsPerSession;
    expect(channel.sent.length).toBe(replies);
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    remove?.();
    await counter?.close();
  });

  const perTurn = (filter?: RegExp) => [...tally.bySql].filter(([sql]) => !filter || filter.test(sql)).reduce((n, [, c]) => n + c, 0) / turns;
  const breakdown = () => [...tally.bySql].sort((a, b) => b[1] - a[1]).map(([sql, n]) => `${(n / turns).toFixed(2)}  ${sql}`).join('\n');

  it('a new session\'s first turn reads its entry once (the claim\'s read)', () => {
    const first = [...firstTally.bySql].sort((a, b) => b[1] - a[1]).map(([sql, n]) => `${(n / sessions).toFixed(2)}  ${sql}`).join('\n');
    console.log(`statements per first turn: ${(firstTally.total / sessions).toFixed(2)}\n${first}`);
    const entryReads = [...firstTally.bySql].filter(([sql]) => sql.startsWith('SELECT value FROM keyv WHERE key')).reduce((n, [, c]) => n + c, 0);
    expect(entryReads, first).toBe(0);
  });

  it(`the work queue sends at most ${QUEUE_BUDGET} statements per turn`, () => {
    expect(perTurn(QUEUE_SQL), breakdown()).toBeLessThanOrEqual(QUEUE_BUDGET);
  });

  // Everything: the queue's share, the claim's read of the entry and transcript (one statement), the turn's one
  // transcript write (the user's message waits for the answer), the entry's write and the ledger (one statement per
  // batch). 13.1 before the ledger, the unlock, the claim read and the transcript write were folded.
  it(`a turn costs at most ${GOAL} statements, everything included`, () => {
    console.log(`statements per turn: ${perTurn().toFixed(2)} (the queue's ${perTurn(QUEUE_SQL).toFixed(2)})\n${breakdown()}`);
    expect(perTurn(), breakdown()).toBeLessThanOrEqual(GOAL);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 4000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error('timed out waiting for a reply');
}
