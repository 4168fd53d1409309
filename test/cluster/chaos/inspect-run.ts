// Not a test: one chaos run with its raw data written out, for a closer look at a failing measure.
//   SWITCHBOARD_TEST_POSTGRES=postgres://root@127.0.0.1:5432/test CHAOS_CHATS=100 CHAOS_MESSAGES=10 \
//     node --import tsx test/cluster/chaos/inspect-run.ts kill|freeze /tmp/chaos-dump.json
// The dump: faults, acknowledged updates, LLM calls (replica, text, start, end, aborted, images, tag), replies,
// sb_inbox rows and the replicas' log lines. The extras (goals, jobs, photos, re-keying) run unless CHAOS_EXTRAS=0.
import { writeFileSync } from 'node:fs';
import { defaultExtras } from './chaos-extras.ts';
import { runChaos } from './chaos-run.ts';
import { parseText } from './webhook-driver.ts';

const kind = process.argv[2] === 'freeze' ? 'freeze' : 'kill';
const out = process.argv[3] ?? 'chaos-dump.json';
const adminUri = process.env.SWITCHBOARD_TEST_POSTGRES;
if (!adminUri) throw new Error('set SWITCHBOARD_TEST_POSTGRES');
const leaseMs = 3000;
const outcome = await runChaos(kind, adminUri, {
  chats: Number(process.env.CHAOS_CHATS ?? 70),
  slackChats: Number(process.env.CHAOS_SLACK_CHATS ?? 30), messagesPerChat: Number(process.env.CHAOS_MESSAGES ?? 10), llmMs: [200, 400], maxConcurrent: 6,
  laneLeaseMs: leaseMs, pollMs: 250, meanThinkMs: Number(process.env.CHAOS_THINK_MS ?? 6000), drainMs: 150_000,
  ...(process.env.CHAOS_EXTRAS === '0' ? {} : { extras: defaultExtras() }),
}, kind === 'kill'
  ? { kind: 'kill', first: { replica: 'r1', at: 0.3, restartAfterMs: 3000 }, second: { replica: 'r2', at: 0.6 } }
  : { kind: 'freeze', replica: 'r2', at: 0.4, forMs: leaseMs + 3000 },
async (raw) => {
  const { rows } = await raw.pool.query<{ message: { text?: string } }>('SELECT * FROM sb_inbox ORDER BY accepted_at');
  writeFileSync(out, JSON.stringify({
    faults: raw.faults, acked: raw.acked, llm: raw.llm.calls,
    sends: raw.telegram.callsOf('sendMessage').map((c) => ({ at: c.at, text: c.body.text as unknown, ok: c.response.ok })),
    slackSends: raw.slack.callsOf('chat.postMessage').map((c) => ({ at: c.at, text: c.body.text, status: c.status })),
    inbox: rows.map((r) => ({ ...r, message: parseText(String(r.message.text ?? '')) })),
    logs: raw.replicas.replicas.map((r) => ({ id: r.id, lines: r.starts.map((s) => s.lines) })),
  }, null, 1));
});
console.log(outcome.summary);
process.exit(0);
