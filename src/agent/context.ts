import type { AgentConfig } from '../config/resolved.ts';
import type { ChatMessage, ToolSchema } from '../providers/types.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { TranscriptEntry, TranscriptMessage } from '../sessions/transcript.ts';
import { countTokens } from './tokens.ts';
import type { InputComponents } from './turn-events.ts';

/** What a request is assembled from. */
export interface ContextInput {
  agent: AgentConfig;
  entry: SessionEntry;
  /** The transcript of the current session id, including this turn's user message. */
  history: TranscriptEntry[];
  model: string;
  contextWindow: number;
  tools: ToolSchema[];
  now: number;
}

/** An assembled request and what its parts cost. */
export interface BuiltContext {
  messages: ChatMessage[];
  components: InputComponents;
  /** Sum of the components. */
  tokens: number;
}

/**
 * Assembles the messages of one LLM request. What changes least comes first (identity, tools, standing
 * instructions), then the history from the last compaction on, then the volatile runtime facts, so that
 * consecutive requests of one session share a byte-identical prefix.
 */
export function buildContext(input: ContextInput): BuiltContext {
  const { agent, entry, model } = input;
  const stable = [
    `You are ${agent.name}, an assistant reached through Switchboard, a chat gateway. Answer in the user's language, concisely, in Markdown.`,
    input.tools.length ? `Tools: ${input.tools.map((t) => `${t.name} (${t.description})`).join('; ')}.` : 'You have no tools in this session.',
    entry.overrides.systemPrompt ?? agent.systemPrompt ?? '',
    entry.overrides.goal ? `Standing goal of this conversation: ${entry.overrides.goal}` : '',
  ].filter(Boolean).join('\n\n');
  const components: InputComponents = { system: 0, bootstrap: 0, tools: 0, history: 0, toolResults: 0, userInput: 0 };
  const messages: ChatMessage[] = [{ role: 'system', content: stable }];
  components.system += countTokens(stable, model) + 4;
  const { summary, kept } = activeHistory(input.history);
  if (summary) {
    const content = `Summary of the earlier conversation:\n${summary}`;
    messages.push({ role: 'system', content });
    components.history += countTokens(content, model) + 4;
  }
  const lastUserIndex = findLastIndex(kept, (m) => m.role === 'user');
  kept.forEach((m, i) => {
    const message = toChatMessage(m);
    const tokens = messageTokens(m, model);
    if (i === lastUserIndex) {
      const runtime = runtimeFacts(input);
      messages.push({ role: 'system', content: runtime });
      components.system += countTokens(runtime, model) + 4;
      components.userInput += tokens;
    } else if (m.role === 'tool') {
      components.toolResults += tokens;
    } else {
      components.history += tokens;
    }
    messages.push(message);
  });
  const tokens = Object.values(components).reduce((a, b) => a + b, 0);
  return { messages, components, tokens };
}

/** The summary of the last compaction and the messages kept after it. */
export function activeHistory(history: TranscriptEntry[]): { summary?: string; kept: TranscriptMessage[] } {
  let start = 0;
  let summary: string | undefined;
  for (let i = history.length - 1; i >= 0; i--) {
    const e = history[i] as TranscriptEntry;
    if (e.type === 'compaction') {
      summary = e.summary;
      const first = history.findIndex((x) => x.type === 'message' && x.id === e.firstKeptId);
      start = first >= 0 ? first : i + 1;
      break;
    }
  }
  return { summary, kept: history.slice(start).filter((e): e is TranscriptMessage => e.type === 'message') };
}

function runtimeFacts(input: ContextInput): string {
  const time = new Date(input.now).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return `Runtime: ${time}; channel ${input.entry.channel} (${input.entry.chatType}); model ${input.model}.`;
}

export function toChatMessage(m: TranscriptMessage): ChatMessage {
  const message: ChatMessage = { role: m.role, content: m.content };
  if (m.name && m.role === 'user') message.name = m.name;
  if (m.toolCalls?.length) message.toolCalls = m.toolCalls;
  if (m.toolCallId) message.toolCallId = m.toolCallId;
  return message;
}

const tokenCache = new WeakMap<TranscriptMessage, { model: string; tokens: number }>();

/** Tokens of one transcript message (content, tool calls, and the per-message overhead), cached per entry. */
export function messageTokens(m: TranscriptMessage, model: string): number {
  const cached = tokenCache.get(m);
  if (cached && cached.model === model) return cached.tokens;
  let tokens = countTokens(m.content, model) + 4;
  for (const call of m.toolCalls ?? []) tokens += countTokens(call.name, model) + countTokens(call.arguments, model) + 3;
  tokenCache.set(m, { model, tokens });
  return tokens;
}

function findLastIndex<T>(items: T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i] as T)) return i;
  return -1;
}
