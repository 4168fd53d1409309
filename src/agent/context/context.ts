import type { AgentConfig } from '../../config/resolved.ts';
import { RUNTIME_PREFIX } from '../../core/runtime-line.ts';
import type { MediaRecord } from '../../core/message.ts';
import type { ChatImage, ChatMessage, ToolSchema } from '../../providers/types.ts';
import type { SessionEntry } from '../../sessions/entry.ts';
import type { TranscriptEntry, TranscriptMessage } from '../../sessions/transcript.ts';
import { renderBootstrap, type BootstrapFile, type BootstrapLimits } from './bootstrap.ts';
import { chatMessageTokens, countTokens, REQUEST_OVERHEAD, toolSchemaTokens } from '../../tokens/tokens.ts';
import type { InputComponents } from '../turn-events.ts';
import { imageLines } from '../user-content.ts';
import { activeHistory, systemWithBlocks } from './summary-blocks.ts';

export { activeHistory, summaryMessage } from './summary-blocks.ts';

/** What a request is assembled from. */
export interface ContextInput {
  agent: AgentConfig;
  entry: SessionEntry;
  /** The transcript of the current session id (possibly a pruned copy), including this turn's user message. */
  history: TranscriptEntry[];
  model: string;
  tools: ToolSchema[];
  /** Time of a user message that has no time of its own (every stored message has one). */
  now: number;
  /** The workspace bootstrap files, already cut to their limits. */
  bootstrap?: readonly BootstrapFile[];
  bootstrapLimits?: BootstrapLimits;
  /** IANA zone the times in the runtime lines are shown in. */
  timezone?: string;
  /** Unused by the assembly; kept for callers that pass it. */
  contextWindow?: number;
  /**
   * Set when the model sees images: the image the request carries for a user entry's image record, undefined
   * when it is not at hand (the file is gone). Unset: every image is its one line (SPEC §15).
   */
  imageOf?: (record: MediaRecord) => ChatImage | undefined;
}

/** An assembled request and what its parts cost. */
export interface BuiltContext {
  messages: ChatMessage[];
  components: InputComponents;
  /** Our token count of the whole request (the sum of the components; uncalibrated). */
  tokens: number;
  /** Our count of each message, parallel to `messages`. */
  messageTokens: number[];
  /** Our count of each tool schema, parallel to the tools. */
  toolTokens: number[];
  /** The transcript messages the request carries (after the last compaction), in order. */
  kept: TranscriptMessage[];
  /** The summary blocks in the system message joined (the compactions in force), if any. */
  summary?: string;
}

/**
 * Assembles the messages of one LLM request, least-changing first so that consecutive requests of one
 * session share a byte-identical prefix that providers can cache:
 *
 * 1. one system message: identity, configured system prompt, tool list, workspace bootstrap files, then
 *    the session facts that change rarely (chat type, channel, model, time zone) and the goal;
 * 2. in the same system message, the summary blocks of the compactions, oldest first (a compaction appends
 *    one; they are merged into one only when together they pass a share of the window);
 * 3. the history from the compaction's first kept message on, verbatim (tool calls paired with their
 *    results), each user message preceded by a runtime line with the time it was sent.
 *
 * The volatile facts (the time) come from each message's own stored time, so a past turn renders the same
 * bytes in every later request: each request extends the previous one (until a compaction or a pruning
 * decision), and the last message is the newest user message or tool result.
 */
export function buildContext(input: ContextInput): BuiltContext {
  const { model } = input;
  const part = systemPart(input);
  const system = part.text;

  const components: InputComponents = { system: 0, bootstrap: 0, tools: 0, history: 0, toolResults: 0, userInput: 0, images: 0 };
  const messages: ChatMessage[] = [];
  const messageTokens: number[] = [];
  const push = (message: ChatMessage, tokens = chatMessageTokens(message, model)): number => {
    messages.push(message);
    messageTokens.push(tokens);
    return tokens;
  };

  const { blocks, summary, kept, compactionIndex } = activeHistory(input.history);
  // Images stay in requests until the next compaction, which turns them into their lines (SPEC §15): the
  // messages kept verbatim from before it show the lines, so the new prefix stays byte-stable until the next.
  const compacted = input.imageOf && compactionIndex > 0 ? compactedImages(input.history, compactionIndex) : undefined;
  // The summary blocks join the one system message (several system messages, or one after the first, are
  // refused by some OpenAI-compatible servers' chat templates), after the system prompt: a compaction appends
  // a block, so the system prompt and every earlier block keep their bytes and the cached prefix survives it.
  const withBlocks = systemWithBlocks(system, blocks);
  const systemMessage: ChatMessage = { role: 'system', content: withBlocks.content, cacheBreaks: withBlocks.cacheBreaks };
  const counted = blocks.length ? blockCountsOf(input.entry, systemMessage, withBlocks.blocksText, model) : { tokens: part.tokens, summaryTokens: 0 };
  const systemTokens = push(systemMessage, counted.tokens);
  const summaryTokens = counted.summaryTokens;
  components.history += summaryTokens;
  components.bootstrap += part.bootstrapTokens;
  components.tools += part.toolsTextTokens;
  components.system += REQUEST_OVERHEAD + systemTokens - part.bootstrapTokens - part.toolsTextTokens - summaryTokens;
  const toolTokens = part.toolTokens.slice();
  components.tools += toolTokens.reduce((a, b) => a + b, 0);

  const paired = pairToolCalls(kept);
  const lastUserIndex = findLastIndex(paired, (m) => m.role === 'user');
  paired.forEach((m, i) => {
    let tokens: number;
    if (m.role === 'user') {
      // The time rides at the head of the user message it belongs to (not as its own system message, which
      // some chat templates refuse mid-conversation); rendered from the stored time, it never changes.
      const user = userMessageOf(m, input, compacted?.has(m) ? undefined : input.imageOf);
      components.system += user.lineTokens;
      components.images += user.imageTokens;
      tokens = user.tokens;
      push(user.message, tokens + user.lineTokens + user.imageTokens);
    } else {
      tokens = push(toChatMessage(m), messageTokensOf(m, model));
    }
    if (i === lastUserIndex) components.userInput += tokens;
    else if (m.role === 'tool') components.toolResults += tokens;
    else components.history += tokens;
  });

  const tokens = (Object.values(components) as number[]).reduce((a, b) => a + b, 0);
  return { messages, components, tokens, messageTokens, toolTokens, kept: paired, ...(summary ? { summary } : {}) };
}

/** Per live session entry: the counts of its system message with the summary blocks, made again when they change. */
const blockCounts = new WeakMap<SessionEntry, { model: string; content: string; tokens: number; summaryTokens: number }>();

/** Tokens of the system message with its blocks (up to a fifth of the window) and of the blocks, counted once per change. */
function blockCountsOf(entry: SessionEntry, message: ChatMessage, blocksText: string, model: string): { tokens: number; summaryTokens: number } {
  const cached = blockCounts.get(entry);
  if (cached && cached.model === model && cached.content === message.content) return cached;
  const counted = { model, content: message.content, tokens: chatMessageTokens(message, model), summaryTokens: countTokens(blocksText, model) };
  blockCounts.set(entry, counted);
  return counted;
}

/** The user entries with images written before the compaction at `compactionIndex` (kept verbatim after it). */
function compactedImages(history: readonly TranscriptEntry[], compactionIndex: number): Set<TranscriptEntry> {
  const out = new Set<TranscriptEntry>();
  for (let i = 0; i < compactionIndex; i++) {
    const e = history[i] as TranscriptEntry;
    if (e.type === 'message' && e.media?.length) out.add(e);
  }
  return out;
}

/**
 * Drops what a provider would reject: a tool result whose call is not in the request, and the tool calls of
 * an assistant message whose results are missing (a turn stopped between the call and its result).
 */
export function pairToolCalls(messages: readonly TranscriptMessage[]): TranscriptMessage[] {
  const answered = new Set(messages.filter((m) => m.role === 'tool' && m.toolCallId).map((m) => m.toolCallId as string));
  const called = new Set<string>();
  const out: TranscriptMessage[] = [];
  for (const m of messages) {
    if (m.role === 'tool') {
      if (m.toolCallId && called.has(m.toolCallId)) out.push(m);
      continue;
    }
    if (m.toolCalls?.length) {
      if (m.toolCalls.every((c) => answered.has(c.id))) {
        for (const c of m.toolCalls) called.add(c.id);
        out.push(m);
      } else {
        const { toolCalls: _dropped, ...rest } = m;
        if (rest.content) out.push(rest);
      }
      continue;
    }
    out.push(m);
  }
  return out;
}

/** The system message of a session without the summary, and what its parts cost. */
interface SystemPart {
  /** What it was made from, compared by identity or value. */
  inputs: readonly unknown[];
  text: string;
  /** Tokens of the system message holding `text` (per-message overhead included). */
  tokens: number;
  bootstrapTokens: number;
  toolsTextTokens: number;
  toolTokens: readonly number[];
}

/** Per live session entry: its system part, rebuilt only when one of its inputs changed. */
const systemParts = new WeakMap<SessionEntry, SystemPart>();

/**
 * The system message of the session and its token counts, cached per session entry: its inputs (agent,
 * prompt, tool list, bootstrap files, model, zone, chat, goal) change at most a few times per session, and
 * the loaded bootstrap files and enabled tool schemas are kept as the same arrays until they change.
 */
function systemPart(input: ContextInput): SystemPart {
  const { entry, model } = input;
  const inputs = [
    input.agent, entry.overrides.systemPrompt, input.tools, input.bootstrap, input.bootstrapLimits?.totalMaxChars,
    model, input.timezone, entry.chatType, entry.channel, entry.goal,
  ];
  const cached = systemParts.get(entry);
  if (cached && cached.inputs.every((value, i) => value === inputs[i])) return cached;
  const toolsText = input.tools.length
    ? `## Tools\nYou can call these tools (their descriptions and parameters come with the request): ${input.tools.map((t) => t.name).join(', ')}.`
    : 'You have no tools in this session.';
  const bootstrapText = input.bootstrap?.length ? renderBootstrap(input.bootstrap, input.bootstrapLimits ?? { maxChars: 0, totalMaxChars: 0 }) : '';
  const goal = entry.goal ? `Standing goal of this conversation: ${entry.goal}` : '';
  const text = [identityText(input), toolsText, bootstrapText, sessionFacts(input), goal].filter(Boolean).join('\n\n');
  const counted = systemTokensOf(text, bootstrapText, toolsText, model);
  const part: SystemPart = { inputs, text, ...counted, toolTokens: input.tools.map((t) => toolSchemaTokens(t, model)) };
  systemParts.set(entry, part);
  return part;
}

/**
 * Token counts of a system text, by content: sessions of one agent, channel and model share the same text,
 * so a new session (every few messages on a busy gateway) does not count a kilobyte of text again.
 */
const systemTokens = new Map<string, { tokens: number; bootstrapTokens: number; toolsTextTokens: number }>();

function systemTokensOf(text: string, bootstrapText: string, toolsText: string, model: string) {
  const key = `${model}\u0000${text}`;
  let counted = systemTokens.get(key);
  if (!counted) {
    counted = {
      tokens: chatMessageTokens({ role: 'system', content: text }, model),
      bootstrapTokens: bootstrapText ? countTokens(bootstrapText, model) : 0,
      toolsTextTokens: countTokens(toolsText, model),
    };
    if (systemTokens.size >= 64) systemTokens.clear();
    systemTokens.set(key, counted);
  }
  return counted;
}

function identityText(input: ContextInput): string {
  const lines = [`You are ${input.agent.name}, an assistant reached through Switchboard, a chat gateway. Answer in the user's language, concisely, in Markdown.`];
  const prompt = input.entry.overrides.systemPrompt ?? input.agent.systemPrompt;
  if (prompt) lines.push(prompt);
  return lines.join('\n\n');
}

function sessionFacts(input: ContextInput): string {
  const chat = input.entry.chatType === 'direct' ? 'a direct chat' : `a ${input.entry.chatType === 'group' ? 'group' : 'channel'} chat`;
  return `Session: ${chat} on ${input.entry.channel}; model ${input.model}; time zone ${input.timezone ?? 'UTC'}. A ${RUNTIME_PREFIX} line at the head of each user message gives the time it was sent.`;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const lines = new Map<string, { text: string; tokens: number }>();
/** From 1973 on every zone's UTC offset is whole minutes, so one UTC minute is one local minute. */
const WHOLE_MINUTE_OFFSETS = Date.UTC(1973, 0, 1);

/**
 * The runtime line of one user message (its time, in the session's zone) and its tokens. The line shows
 * minutes, so it is made and counted once per minute, zone and model: every request renders them all, and
 * the messages of one minute share it.
 */
function runtimeLine(at: string, input: ContextInput): { text: string; tokens: number } {
  const zone = input.timezone ?? 'UTC';
  const parsed = Date.parse(at);
  const time = Number.isNaN(parsed) ? input.now : parsed;
  const key = `${input.model}\u0000${zone}\u0000${time >= WHOLE_MINUTE_OFFSETS ? Math.floor(time / 60_000) : `at ${time}`}`;
  const hit = lines.get(key);
  if (hit) return hit;
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-CA', { timeZone: zone, weekday: 'short', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    formatters.set(zone, format);
  }
  const text = `${RUNTIME_PREFIX} ${format.format(time)} (${zone})`;
  const line = { text, tokens: countTokens(`${text}\n`, input.model) };
  if (lines.size >= 8192) lines.delete(lines.keys().next().value as string);
  lines.set(key, line);
  return line;
}

/** A user message as requests carry it, its runtime line first: what it cost to make does not change. */
interface RenderedUser {
  model: string;
  zone: string;
  /** The images it shows (none when the model does not see). */
  imageOf?: ContextInput['imageOf'];
  message: ChatMessage;
  lineTokens: number;
  /** Of its text (with the lines of images not shown). */
  tokens: number;
  imageTokens: number;
}

/** Per transcript entry: every request of a session carries all its user messages again, each the same bytes. */
const renderedUsers = new WeakMap<TranscriptMessage, RenderedUser>();

/** A user message with its runtime line and images, and the tokens of each, made once per entry, model, zone and image source. */
function userMessageOf(m: TranscriptMessage, input: ContextInput, imageOf: ContextInput['imageOf']): RenderedUser {
  const zone = input.timezone ?? 'UTC';
  const hit = renderedUsers.get(m);
  if (hit && hit.model === input.model && hit.zone === zone && (hit.imageOf === imageOf || !m.media?.length)) return hit;
  const line = runtimeLine(m.at, input);
  const message = toChatMessage(m);
  let tokens: number;
  let imageTokens = 0;
  const images = imageOf && m.media?.length ? shownImages(m.media, imageOf) : undefined;
  if (images) {
    message.content = `${m.content}${imageLines(m.media, images.shown)}`;
    message.images = images.list;
    for (const image of images.list) imageTokens += image.tokens;
    tokens = chatMessageTokens({ role: message.role, content: message.content, ...(message.name ? { name: message.name } : {}) }, input.model);
  } else {
    tokens = messageTokensOf(m, input.model);
  }
  message.content = `${line.text}\n${message.content}`;
  const rendered: RenderedUser = { model: input.model, zone, imageOf, message, lineTokens: line.tokens, tokens, imageTokens };
  // An entry without a readable time shows the request's time, which changes: made again each time.
  if (!Number.isNaN(Date.parse(m.at))) renderedUsers.set(m, rendered);
  return rendered;
}

function shownImages(media: readonly MediaRecord[], imageOf: NonNullable<ContextInput['imageOf']>): { list: ChatImage[]; shown: Set<MediaRecord> } | undefined {
  let out: { list: ChatImage[]; shown: Set<MediaRecord> } | undefined;
  for (const record of media) {
    if (record.as !== 'image') continue;
    const image = imageOf(record);
    if (!image) continue;
    out ??= { list: [], shown: new Set() };
    out.list.push(image);
    out.shown.add(record);
  }
  return out;
}

/** A transcript message as a request carries it; a user entry's images as their lines (see {@link buildContext} for images shown). */
export function toChatMessage(m: TranscriptMessage): ChatMessage {
  const message: ChatMessage = { role: m.role, content: m.media ? `${m.content}${imageLines(m.media)}` : m.content };
  if (m.name && m.role === 'user') message.name = m.name;
  if (m.toolCalls?.length) message.toolCalls = m.toolCalls;
  if (m.toolCallId) message.toolCallId = m.toolCallId;
  return message;
}

const tokenCache = new WeakMap<TranscriptMessage, { model: string; tokens: number }>();

/** Tokens one transcript message costs in a request, cached per entry object. */
export function messageTokensOf(m: TranscriptMessage, model: string): number {
  const cached = tokenCache.get(m);
  if (cached && cached.model === model) return cached.tokens;
  const tokens = chatMessageTokens(toChatMessage(m), model);
  tokenCache.set(m, { model, tokens });
  return tokens;
}

function findLastIndex<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i] as T)) return i;
  return -1;
}
