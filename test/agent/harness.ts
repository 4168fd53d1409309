import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { AgentRuntime } from '../../src/agent/runtime.ts';
import { memoryTools } from '../../src/tools/memory-tools.ts';
import { ToolRegistry } from '../../src/tools/registry.ts';
import type { TimeoutHandle } from '../../src/tools/timeout.ts';
import type { Tool } from '../../src/tools/tool.ts';
import type { ResolvedConfig } from '../../src/config/resolved.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { createProviders } from '../../src/providers/registry.ts';
import type { ChatMessage } from '../../src/providers/types.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import { SessionManager, type ActiveSession } from '../../src/sessions/manager.ts';
import type { ListSessionsOptions, SessionPage, SessionStore } from '../../src/sessions/store.ts';
import { JsonlTranscriptStore, type TranscriptEntry, type TranscriptMessage } from '../../src/sessions/transcript.ts';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';

/** Session entries in memory (the runtime tests need no SQLite). */
export class MemoryStore implements SessionStore {
  readonly entries = new Map<string, SessionEntry>();
  async get(key: string) { const e = this.entries.get(key); return e ? structuredClone(e) : undefined; }
  async set(entry: SessionEntry) { this.entries.set(entry.key, structuredClone(entry)); }
  async delete(key: string) { return this.entries.delete(key); }
  async list(_options?: ListSessionsOptions): Promise<SessionPage> { return { entries: [...this.entries.values()] }; }
  async count() { return this.entries.size; }
  async close() {}
}

/** What a recorded request was, by the engine's prompts. */
export function kindOf(request: RecordedRequest): 'turn' | 'compaction' | 'memory-flush' {
  const first = request.body.messages[0]?.content ?? '';
  if (first.startsWith('You compact a chat conversation')) return 'compaction';
  // A summary request that shares the turns' prefix ends with its instruction.
  const last = request.body.messages.at(-1);
  if (last?.role === 'user' && JSON.stringify(last.content ?? '').includes('[Compaction request]')) return 'compaction';
  if (request.body.messages.some((m) => m.role === 'user' && (m.content ?? '').includes('[Pre-compaction memory flush]'))) return 'memory-flush';
  return 'turn';
}

/** A wire message back in our shape (to count it with our tokenizer). */
export function fromWire(m: RecordedRequest['body']['messages'][number]): ChatMessage {
  const out: ChatMessage = { role: m.role as ChatMessage['role'], content: m.content ?? '' };
  if (m.name) out.name = m.name;
  if (m.tool_call_id) out.toolCallId = m.tool_call_id;
  if (m.tool_calls?.length) {
    out.toolCalls = (m.tool_calls as { id: string; function: { name: string; arguments: string } }[]).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
  }
  return out;
}

export interface Harness {
  runtime: AgentRuntime;
  fake: FakeOpenAI;
  clock: ManualClock;
  config: ResolvedConfig;
  sessions: SessionManager;
  transcripts: JsonlTranscriptStore;
  dir: string;
  key: string;
  /** Runs one turn of `alice` in `agent:main:main`; returns the reply text. */
  send(text: string): Promise<string>;
  session(): ActiveSession;
  history(): Promise<TranscriptEntry[]>;
  /** The transcript file as written on disk. */
  fileEntries(): (TranscriptEntry | { type: 'session' })[];
  turnRequests(): RecordedRequest[];
  /** Seeds the current session with finished exchanges (user + assistant), `tokensEach` words long. */
  seed(count: number, text: (i: number) => string): Promise<void>;
  close(): Promise<void>;
}

/** An AgentRuntime on a ManualClock against a fake OpenAI server, with optional tools. */
export async function startHarness(options: {
  config?: Record<string, unknown>;
  /** Extra tools, enabled with preset `full`; without them the preset is `none` (memory_write still serves the flush). */
  tools?: Tool[];
  /** The timer of tool calls (tests fire it themselves). */
  toolTimeout?: (ms: number) => TimeoutHandle;
  reply?: (request: RecordedRequest) => FakeReply;
  start?: string;
} = {}): Promise<Harness> {
  const tmp = tempDir('switchboard-agent-');
  const fake = await startFakeOpenAI(options.reply ?? defaultReply);
  const clock = new ManualClock(options.start ?? '2026-03-02T10:00:00Z');
  const config = testConfig(tmp.dir, mergeDeep({
    providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
    session: { reset: { mode: 'off', timezone: 'UTC' } },
    agents: { defaults: { tools: { preset: options.tools ? 'full' : 'none' } } },
  }, options.config ?? {}));
  const logger = silentLogger();
  const store = new MemoryStore();
  const transcripts = new JsonlTranscriptStore({ dir: path.join(config.stateDir, 'agents', 'main', 'sessions'), logger });
  const sessions = new SessionManager({ store, transcripts, clock, logger, maxActiveSessions: 100, expiresAt: () => Number.POSITIVE_INFINITY });
  const tools = new ToolRegistry({ timeoutMs: config.tools.timeoutSeconds * 1000, maxResultChars: config.tools.maxResultChars, timeout: options.toolTimeout });
  for (const tool of [...memoryTools(), ...(options.tools ?? [])]) tools.register(tool);
  const runtime = new AgentRuntime({ config, sessions, transcripts, providers: createProviders(config), clock, logger, tools });
  const key = 'agent:main:main';
  let n = 0;
  const harness: Harness = {
    runtime, fake, clock, config, sessions, transcripts, dir: tmp.dir, key,
    async send(text) {
      const message: InboundMessage = {
        id: `m${++n}`, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
        sender: { id: 'alice', name: 'Alice' }, text, attachments: [], mentionsBot: true, receivedAt: clock.now(),
      };
      const result = await runtime.runTurn({ message, sessionKey: key, correlationId: randomUUID(), signal: new AbortController().signal });
      return result.replies.map((r) => r.text).join('\n');
    },
    session() {
      const s = sessions.peek(key);
      if (!s) throw new Error('no session yet');
      return s;
    },
    history() {
      return runtime.historyOf(harness.session());
    },
    fileEntries() {
      const file = transcripts.pathOf(harness.session().entry.sessionId);
      return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as TranscriptEntry);
    },
    turnRequests() {
      return fake.requests.filter((r) => kindOf(r) === 'turn');
    },
    async seed(count, text) {
      const s = harness.session();
      const entries: TranscriptMessage[] = [];
      for (let i = 0; i < count; i++) {
        const at = new Date(clock.now()).toISOString();
        entries.push({ type: 'message', id: randomUUID(), role: 'user', content: text(i), at });
        entries.push({ type: 'message', id: randomUUID(), role: 'assistant', content: `Noted ${i}.`, at });
      }
      await runtime.appendEntries(s, entries);
    },
    async close() {
      await sessions.flush();
      await fake.close();
      tmp.remove();
    },
  };
  return harness;
}

/** The fake's default: summaries, flush notes and echoes, told apart by the prompts. */
export function defaultReply(request: RecordedRequest): FakeReply {
  const kind = kindOf(request);
  if (kind === 'compaction') return { content: `## Decisions\n- summary #${request.body.messages.length}`, usage: null };
  if (kind === 'memory-flush') return { content: 'NO_REPLY', usage: null };
  return { content: 'ok', usage: null };
}

function mergeDeep(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const cur = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && cur && typeof cur === 'object' && !Array.isArray(cur)
      ? mergeDeep(cur as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}
