// The context engine's figures: tokenizer throughput and the error of chars/4 on English, Chinese and code;
// a scripted 200-turn session with tool output against an in-process fake OpenAI server, run with and
// without compaction and pruning: input tokens per request, the share of each request that is a
// byte-identical prefix of the previous one (turn requests, and every call including the summary calls),
// and whether the identifiers planted in user messages and tool outputs all still reach the model after the
// compactions. Standalone: `node --import tsx bench/context-bench.ts`.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { countTokens as countCl100kStrict } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as countO200kStrict } from 'gpt-tokenizer/encoding/o200k_base';
import { z } from 'zod';
import { AgentRuntime } from '../src/agent/runtime.ts';
import { ToolRegistry } from '../src/tools/registry.ts';
import { defineTool } from '../src/tools/tool.ts';
import { loadConfig } from '../src/config/load.ts';
import { ManualClock } from '../src/core/clock.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { createProviders } from '../src/providers/registry.ts';
import type { SessionEntry } from '../src/sessions/entry.ts';
import { SessionManager } from '../src/sessions/manager.ts';
import type { SessionPage, SessionStore } from '../src/sessions/store.ts';
import { JsonlTranscriptStore } from '../src/sessions/transcript.ts';
import { mean, nowMs, percentile, round } from './stats.ts';
import { checkIdentifiers, identifiersIn, PrefixMeter, summarizedPart, textOf } from './prefix-meter.ts';
import { prng } from './prng.ts';

/** Special-token strings (`<|endoftext|>`, which src/agent's own comments quote) count as the text they are, as in the gateway. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };
const countCl100k = (text: string): number => countCl100kStrict(text, AS_TEXT);
const countO200k = (text: string): number => countO200kStrict(text, AS_TEXT);

const root = path.resolve(import.meta.dirname, '..');


const ENGLISH = [
  'The gateway routes every inbound message to a session, and the session decides what the model sees.',
  'Could you check why the deploy of build 4182 failed on the staging cluster last night?',
  'I moved the meeting with the finance team to Thursday at 3 pm, so please update the calendar invite.',
  'Compaction summarizes the older part of a long conversation and keeps the most recent messages verbatim.',
  'Our tokenizer counts tokens exactly instead of guessing from the number of characters.',
  'Please write a short, friendly reply to the customer who asked about the refund for order #88231.',
  "It's fine to cache the prefix of a request when nothing before it has changed since the last call.",
  'The quarterly report shows revenue up 12% year over year, while support tickets dropped by a third.',
  'When the tool returns a very long log, only its beginning and its end matter for the next step.',
  'Remember that Alice prefers short answers and does not want emoji in formal emails.',
];
const CHINESE = [
  '网关把每一条消息路由到一个会话，由会话决定模型能看到什么。',
  '请帮我查一下昨晚预发布环境的第4182次构建为什么失败了。',
  '我把和财务团队的会议改到了周四下午三点，请更新一下日历邀请。',
  '压缩会把长对话中较早的部分总结成摘要，并原样保留最近的消息。',
  '我们的分词器会精确计算令牌数量，而不是根据字符数来估算。',
  '请给询问订单88231退款问题的客户写一封简短而友好的回复。',
  '如果请求前面的内容自上次调用以来没有变化，就可以缓存这个前缀。',
  '季度报告显示收入同比增长百分之十二，而客服工单减少了三分之一。',
  '当工具返回很长的日志时，只有开头和结尾对下一步有用。',
  '记住，爱丽丝喜欢简短的回答，正式邮件里不要用表情符号。',
];

function corpus(sentences: string[], chars: number, seed: number, joiner: string): string {
  const rand = prng(seed);
  const parts: string[] = [];
  let length = 0;
  while (length < chars) {
    const s = sentences[Math.floor(rand() * sentences.length)] as string;
    const piece = rand() < 0.15 ? `${s}\n\n` : `${s}${joiner}`;
    parts.push(piece);
    length += piece.length;
  }
  return parts.join('');
}

/** Real, varied English: the READMEs of installed packages (Markdown prose with code), else the sentences above. */
function englishCorpus(chars: number): { text: string; source: string } {
  const names = ['openai', 'grammy', 'undici', 'keyv', 'dotenv', 'semver', 'debug', 'qs', 'tar', 'minipass', 'node-fetch', 'socks', 'cacache', 'picomatch', 'body-parser', 'router'];
  let text = '';
  for (const name of names) {
    try { text += `${readFileSync(path.join(root, 'node_modules', name, 'README.md'), 'utf8')}\n\n`; } catch { /* not installed */ }
  }
  if (text.length < 100_000) return { text: corpus(ENGLISH, chars, 1, ' '), source: 'generated from 10 sentences' };
  return { text: repeatTo(text, chars), source: 'READMEs of installed npm packages' };
}

/** Real, varied Chinese: TypeScript's zh-CN diagnostic messages, else the sentences above. */
function chineseCorpus(chars: number): { text: string; source: string } {
  try {
    const messages = JSON.parse(readFileSync(path.join(root, 'node_modules/typescript/lib/zh-cn/diagnosticMessages.generated.json'), 'utf8')) as Record<string, string>;
    return { text: repeatTo(Object.values(messages).join('\n'), chars), source: "TypeScript's zh-CN diagnostic messages" };
  } catch {
    return { text: corpus(CHINESE, chars, 2, ''), source: 'generated from 10 sentences' };
  }
}

function repeatTo(text: string, chars: number): string {
  let out = text;
  while (out.length < chars) out += text;
  return out.slice(0, chars);
}

function codeCorpus(chars: number): string {
  const dir = path.join(root, 'src', 'agent');
  let text = '';
  // Every file under src/agent/, ordered by file name (the order of the one flat folder it was until it was split).
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.ts'));
  const byName = (n: string) => path.basename(n);
  files.sort((x, y) => (byName(x) < byName(y) ? -1 : byName(x) > byName(y) ? 1 : 0));
  for (const name of files) text += readFileSync(path.join(dir, name), 'utf8');
  return repeatTo(text, chars);
}

/** Splits a text into chunks of about `size` characters (a chat message or tool result each). */
function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** Best of three timed passes (after one warm-up pass, as in a long-running gateway). */
function bestOf3(run: () => void): number {
  run();
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 3; i++) {
    const t0 = nowMs();
    run();
    best = Math.min(best, nowMs() - t0);
  }
  return best;
}

function measure(label: string, source: string, text: string, count: (t: string) => number): Record<string, unknown> {
  const pieces = chunks(text, 2000);
  const bytes = Buffer.byteLength(text, 'utf8');
  const perChunk = pieces.map((p) => count(p));
  const tokens = perChunk.reduce((a, b) => a + b, 0);
  const tokenizerMs = bestOf3(() => { for (const p of pieces) count(p); });
  let sink = 0;
  const quarterMs = bestOf3(() => { for (let r = 0; r < 2000; r++) for (const p of pieces) sink += Math.ceil(p.length / 4); }) / 2000;
  if (sink < 0) throw new Error('unreachable');
  const errors = pieces.map((p, i) => (Math.ceil(p.length / 4) - (perChunk[i] as number)) / (perChunk[i] as number));
  return {
    text: label, source, chars: text.length, utf8Bytes: bytes, tokens, charsPerToken: round(text.length / tokens, 2),
    tokenizerMBps: round(bytes / 1e6 / (tokenizerMs / 1000), 2),
    charsDiv4MBps: round(bytes / 1e6 / (quarterMs / 1000), 0),
    charsDiv4Error: {
      totalPct: round(((Math.ceil(text.length / 4) - tokens) / tokens) * 100, 1),
      meanAbsPerChunkPct: round(mean(errors.map((e) => Math.abs(e))) * 100, 1),
      worstPerChunkPct: round(Math.max(...errors.map((e) => Math.abs(e))) * 100, 1),
    },
  };
}

function tokenizerBench(quick: boolean): Record<string, unknown>[] {
  const size = quick ? 200_000 : 1_000_000;
  const english = englishCorpus(size);
  const chinese = chineseCorpus(Math.floor(size / 3));
  const code = codeCorpus(Math.floor(size / 2));
  return [
    measure('English (o200k_base)', english.source, english.text, countO200k),
    measure('English (cl100k_base)', english.source, english.text, countCl100k),
    measure('Chinese (o200k_base)', chinese.source, chinese.text, countO200k),
    measure('Chinese (cl100k_base)', chinese.source, chinese.text, countCl100k),
    measure('TypeScript source (o200k_base)', 'src/agent/**/*.ts', code, countO200k),
  ];
}

// ---- the scripted session ------------------------------------------------------------------------------

class MemoryStore implements SessionStore {
  private readonly entries = new Map<string, SessionEntry>();
  async get(key: string) { const e = this.entries.get(key); return e ? structuredClone(e) : undefined; }
  async set(entry: SessionEntry) { this.entries.set(entry.key, structuredClone(entry)); }
  async delete(key: string) { return this.entries.delete(key); }
  async list(): Promise<SessionPage> { return { entries: [...this.entries.values()] }; }
  async count() { return this.entries.size; }
  async close() {}
}

type Kind = 'turn' | 'compaction' | 'memory-flush';

interface FakeServer {
  baseURL: string;
  /** Turn requests, each compared with the previous turn request as they arrive. */
  turns: PrefixMeter;
  /** Every request (turns, summary calls, memory flushes), each compared with the request just before it. */
  all: PrefixMeter;
  /** Each summary call's share that is a prefix of the request just before it. */
  summaryShares: number[];
  /** The body of the last turn request (what the model got last). */
  lastTurn?: { messages: { role: string; content: unknown }[] };
  close(): Promise<void>;
}

/**
 * An OpenAI-compatible fake: a tool call for user messages that ask for one, an answer otherwise; a summary
 * call is answered with a short summary that copies every planted identifier of the part it summarizes.
 */
async function startFake(summaryWords = 0): Promise<FakeServer> {
  let n = 0;
  const fake: FakeServer = { baseURL: '', turns: new PrefixMeter(), all: new PrefixMeter(), summaryShares: [], close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(parts).toString('utf8');
      const body = JSON.parse(raw) as { model: string; messages: { role: string; content: string | null }[] };
      const first = body.messages[0]?.content ?? '';
      const last = body.messages.at(-1);
      const lastText = textOf(last?.content);
      const kind: Kind = first.startsWith('You compact') || (last?.role === 'user' && lastText.includes('[Compaction request]'))
        ? 'compaction' : lastText.includes('[Pre-compaction memory flush]') ? 'memory-flush' : 'turn';
      const share = fake.all.add(raw);
      if (kind === 'turn') {
        fake.turns.add(raw);
        fake.lastTurn = body;
      }
      if (kind === 'compaction' && share !== undefined) fake.summaryShares.push(share);
      let message: Record<string, unknown>;
      if (kind === 'compaction') {
        const ids = identifiersIn(summarizedPart(body.messages));
        message = { role: 'assistant', content: `## Decisions\n- keep build 4182 under watch\n## Open tasks\n- refund for order #88231\n## Constraints and preferences\n- short answers, no emoji\n## Pending asks\n- none\n## Exact identifiers\n- build 4182, order #88231, ticket OPS-${n}${ids.length ? `\n- ${ids.join(', ')}` : ''}\n## Context\n- a long support and ops conversation (${body.messages.length} messages summarized)${summaryWords ? `\n- ${corpus(ENGLISH, summaryWords * 6, n, ' ')}` : ''}` };
      } else if (kind === 'memory-flush') message = { role: 'assistant', content: '- Alice prefers short answers.' };
      else if (last?.role === 'user' && lastText.includes('[needs a tool]')) {
        message = { role: 'assistant', content: null, tool_calls: [{ id: `call_${++n}`, type: 'function', function: { name: 'read_log', arguments: JSON.stringify({ service: `svc-${n % 7}`, lines: 200 }) } }] };
      } else message = { role: 'assistant', content: `Here is what I found (${++n}): ${ENGLISH[n % ENGLISH.length]} ${ENGLISH[(n + 3) % ENGLISH.length]} Anything else?` };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        id: `chatcmpl-${n}`, object: 'chat.completion', created: 1_700_000_000, model: body.model,
        choices: [{ index: 0, message: { refusal: null, ...message }, finish_reason: message.tool_calls ? 'tool_calls' : 'stop', logprobs: null }],
      }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return fake;
}

/** A deterministic log, about 80 characters a line. */
function logOutput(args: string, rand: () => number): string {
  const { service, lines } = JSON.parse(args) as { service: string; lines: number };
  const out: string[] = [];
  for (let i = 0; i < lines / 2; i++) {
    const level = rand() < 0.1 ? 'ERROR' : rand() < 0.3 ? 'WARN' : 'INFO';
    out.push(`2026-03-02T10:${String(i % 60).padStart(2, '0')}:${String(Math.floor(rand() * 60)).padStart(2, '0')}Z ${level} ${service} req=${Math.floor(rand() * 1e6).toString(16)} latency_ms=${Math.floor(rand() * 900)}`);
  }
  return out.join('\n');
}

interface Variant {
  name: string;
  contextWindow: number;
  compaction: boolean;
  pruning: boolean;
  /** About this many words more in every summary (the fake's are short; a model's are often a thousand tokens or more). */
  summaryWords?: number;
}

async function runSession(variant: Variant, turns: number): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-context-bench-'));
  const fake = await startFake(variant.summaryWords);
  try {
    const config = loadConfig({
      cwd: dir, env: {}, dotenv: false,
      overrides: {
        stateDir: path.join(dir, 'data'), logLevel: 'silent',
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-bench', model: 'gpt-4o-mini', contextWindow: variant.contextWindow, maxRetries: 0 } },
        agents: { defaults: {
          workspace: path.join(dir, 'workspace'),
          compaction: { enabled: variant.compaction, reserveTokens: 8000, keepRecentTokens: 8000, memoryFlush: true },
          contextPruning: { mode: variant.pruning ? 'cache-ttl' : 'off', ttl: '5m', keepLastAssistants: 3 }, tools: { preset: 'full' },
        } },
        session: { reset: { mode: 'off', timezone: 'UTC' } },
      },
    });
    const clock = new ManualClock('2026-03-02T09:00:00Z');
    const logger = silentLogger();
    const transcripts = new JsonlTranscriptStore({ dir: path.join(config.stateDir, 'sessions'), logger });
    const sessions = new SessionManager({ store: new MemoryStore(), transcripts, clock, logger, maxActiveSessions: 10, expiresAt: () => Number.POSITIVE_INFINITY });
    const rand = prng(42);
    // Unique identifiers the model must still be able to see at the end: one in every third user message and
    // in the first line of every tool output.
    const planted: string[] = [];
    const plant = (prefix: 'REF' | 'TRC') => {
      const id = `${prefix}-${(0xa00000 + planted.length * 4099).toString(16)}`;
      planted.push(id);
      return id;
    };
    const tools = new ToolRegistry({ timeoutMs: 60_000, maxResultChars: 1_000_000 });
    tools.register(defineTool({
      name: 'read_log', group: 'bench', description: 'reads the last lines of a service log',
      schema: z.object({ service: z.string(), lines: z.number().optional() }), run: async (args) => `trace ${plant('TRC')}\n${logOutput(JSON.stringify(args), rand)}`,
    }));
    const runtime = new AgentRuntime({ config, sessions, transcripts, providers: createProviders(config), clock, logger, tools });
    const calls: { kind: Kind; input: number }[] = [];
    runtime.events.subscribe({ onLlmCall: (e) => { if (!e.error) calls.push({ kind: e.kind, input: e.usage.inputTokens }); } });
    const userRand = prng(7);
    const t0 = nowMs();
    for (let i = 0; i < turns; i++) {
      const wantsTool = i % 2 === 0;
      const reference = i % 3 === 0 ? ` Note the reference ${plant('REF')}.` : '';
      const text = `${ENGLISH[Math.floor(userRand() * ENGLISH.length)]} ${ENGLISH[Math.floor(userRand() * ENGLISH.length)]}${reference}${wantsTool ? ' [needs a tool]' : ''}`;
      const message: InboundMessage = {
        id: `m${i}`, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
        sender: { id: 'alice', name: 'Alice' }, text, attachments: [], mentionsBot: true, receivedAt: clock.now(),
      };
      await runtime.runTurn({ message, sessionKey: 'agent:main:main', correlationId: randomUUID(), signal: new AbortController().signal });
      clock.advance(i % 25 === 24 ? 10 * 60_000 : 45_000);
    }
    const wallMs = nowMs() - t0;
    const turnInputs = calls.filter((c) => c.kind === 'turn').map((c) => c.input);
    const entry = sessions.peek('agent:main:main')?.entry;
    await sessions.flush();
    const records = entry ? (await transcripts.read(entry.sessionId)).filter((e) => e.type === 'compaction') : [];
    return {
      variant: variant.name, contextWindow: variant.contextWindow, compaction: variant.compaction, pruning: variant.pruning, ...(variant.summaryWords ? { summaryWords: variant.summaryWords } : {}),
      turns, turnRequests: turnInputs.length,
      summaryCalls: calls.filter((c) => c.kind === 'compaction').length,
      memoryFlushCalls: calls.filter((c) => c.kind === 'memory-flush').length,
      compactions: entry?.compactionCount ?? 0,
      // Compactions after the first that rewrote the summary blocks into one (the rest appended a block).
      blockMerges: records.slice(1).filter((r) => !r.appended).length,
      inputTokensPerTurnRequest: {
        mean: Math.round(mean(turnInputs)), p50: percentile(turnInputs, 50), p95: percentile(turnInputs, 95), max: Math.max(...turnInputs), last: turnInputs.at(-1),
        everyFortiethRequest: turnInputs.filter((_, i) => i % 40 === 39),
      },
      inputTokensTotal: { turns: turnInputs.reduce((a, b) => a + b, 0), allCalls: calls.reduce((a, c) => a + c.input, 0) },
      prefixShareOfPrevious: fake.turns.report(),
      bytesNotInPrefix: fake.turns.lost(),
      prefixShareAllCalls: fake.all.report(),
      summaryCallPrefixShare: fake.summaryShares.length ? { mean: round(mean(fake.summaryShares), 4), min: round(Math.min(...fake.summaryShares), 4) } : undefined,
      identifiers: fake.lastTurn ? checkIdentifiers(planted, fake.lastTurn, /\n\nSummary of the (?:earlier conversation|part of the conversation that followed) \(/) : undefined,
      wallSeconds: round(wallMs / 1000, 2),
    };
  } finally {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs every part; `quick` uses a smaller tokenizer corpus (the session always has 200 turns). */
export async function runContextBench(options: { quick?: boolean } = {}): Promise<Record<string, unknown>> {
  const quick = options.quick ?? false;
  const tokenizer = tokenizerBench(quick);
  const turns = 200;
  const variants: Variant[] = [
    { name: 'no compaction, no pruning', contextWindow: 1_000_000, compaction: false, pruning: false },
    { name: 'pruning (cache-ttl 5m, keep 3)', contextWindow: 1_000_000, compaction: false, pruning: true },
    { name: 'compaction (32k window)', contextWindow: 32_000, compaction: true, pruning: false },
    { name: 'compaction (32k window) + pruning', contextWindow: 32_000, compaction: true, pruning: true },
    { name: 'compaction (32k window), 1,000-word summaries', contextWindow: 32_000, compaction: true, pruning: false, summaryWords: 1000 },
  ];
  const session: Record<string, unknown>[] = [];
  for (const v of variants) session.push(await runSession(v, turns));
  return {
    tokenizer,
    session: {
      script: `${turns} turns; every other turn one tool call returning a ~8 KB log; 45 s between turns, a 10-minute break every 25 turns; model gpt-4o-mini (o200k_base); reserveTokens 8000, keepRecentTokens 8000; input tokens are our count (the fake reports no usage); an identifier planted in every third user message and every tool output`,
      variants: session,
    },
    cacheGoals: cacheGoals(session),
  };
}

/**
 * Issue 30's goals for each compaction variant: the bytes-weighted prefix share (turn requests against the
 * previous turn request, and every call against the call before it, summary calls included), the mean turn
 * input against sending the whole history (the first variant), and every planted identifier still reaching
 * the model after the compactions. `bytesNotInPrefix` says where the rest went: messages no earlier request
 * had (the tool outputs) cap the share whatever compaction does.
 */
function cacheGoals(variants: Record<string, unknown>[]): Record<string, unknown>[] {
  type Row = {
    variant: string; compaction: boolean; compactions: number; inputTokensPerTurnRequest: { mean: number };
    prefixShareOfPrevious: { bytesWeighted: number }; prefixShareAllCalls: { bytesWeighted: number }; bytesNotInPrefix: Record<string, number>;
    identifiers?: { planted: number; recoverable: number; inMoreThanOnePlace: number };
  };
  const rows = variants as unknown as Row[];
  const full = rows[0]?.inputTokensPerTurnRequest.mean ?? 0;
  return rows.filter((r) => r.compaction).map((r) => ({
    variant: r.variant,
    compactions: r.compactions,
    bytesWeightedPrefixShare: { turns: r.prefixShareOfPrevious.bytesWeighted, allCalls: r.prefixShareAllCalls.bytesWeighted, goal: 0.95 },
    ceilingWithoutAnyBreak: round(1 - (r.bytesNotInPrefix.newMessages ?? 0) - (r.bytesNotInPrefix.afterMessagesArray ?? 0), 4),
    meanInputVsFullHistory: { share: round(r.inputTokensPerTurnRequest.mean / full, 4), goal: 0.1 },
    identifiersRecoverable: r.identifiers ? `${r.identifiers.recoverable}/${r.identifiers.planted} (${r.identifiers.inMoreThanOnePlace} in more than one place)` : 'n/a',
  }));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runContextBench({ quick: process.env.BENCH_QUICK === '1' }).then((result) => {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  }, (error: unknown) => {
    process.stderr.write(`context bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
