import { createRequire } from 'node:module';
import { modelToEncodingMap } from 'gpt-tokenizer/mapping';
import { segmentEnds } from './token-segments.ts';

/** Tokenizer encodings we count with. */
export type Encoding = 'o200k_base' | 'cl100k_base';

/** A tool call of an assistant message, as counted (a transcript's `ToolCall` has these and its id). */
export interface CountedToolCall {
  name: string;
  /** JSON-encoded arguments. */
  arguments: string;
}

/** What a chat message costs tokens for (a provider's `ChatMessage`). */
export interface CountedMessage {
  /** Its token is part of {@link MESSAGE_OVERHEAD}. */
  role: string;
  content: string;
  name?: string;
  toolCalls?: readonly CountedToolCall[];
  /** The call a tool result answers; not counted. */
  toolCallId?: string;
  /** Images of a user message: each adds its own estimate (made upstream with the provider's tile rule). */
  images?: readonly CountedImage[];
}

/** An image of a chat message, as counted (a provider's `ChatImage`). */
export interface CountedImage {
  /** Estimated prompt tokens of the image. */
  tokens: number;
}

/** A tool schema as sent in `tools` (a provider's `ToolSchema`). */
export interface CountedToolSchema {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * Tokens every chat message costs beyond its content: `<|start|>`, the role, `<|message|>` and `<|end|>`
 * (OpenAI's published accounting for chat models: 3 per message plus 1 for the role).
 */
export const MESSAGE_OVERHEAD = 4;
/** A `name` field costs one token beyond its own text. */
export const NAME_OVERHEAD = 1;
/** Every request is primed with `<|start|>assistant<|message|>`. */
export const REQUEST_OVERHEAD = 3;
/** Per tool call in an assistant message, beyond its name and arguments (id, type, separators). */
export const TOOL_CALL_OVERHEAD = 3;
/** Per tool schema in `tools`, beyond its JSON (the function-definition wrapper). */
export const TOOL_SCHEMA_OVERHEAD = 8;

/** The encoding of each model name seen (every token count asks). */
const encodings = new Map<string, Encoding>();

/**
 * The encoding for a model. Known OpenAI model names use gpt-tokenizer's own model table; other names are
 * matched by family (`gpt-4`, `gpt-3.5`, `text-embedding-ada/3` → `cl100k_base`; `gpt-4o`, `gpt-4.1`,
 * `gpt-5`, `o1`…`o4`, `gpt-oss` → `o200k_base`). **Fallback:** any other model (Llama, Qwen, Mistral,
 * Claude, Gemini, …) is counted with `o200k_base`, the closest general-purpose BPE we ship; the context engine's
 * per-model calibration factor then corrects the difference using the usage the provider reports.
 */
export function encodingFor(model: string): Encoding {
  let encoding = encodings.get(model);
  if (!encoding) {
    encoding = encodingOfName(model);
    if (encodings.size >= 1024) encodings.clear();
    encodings.set(model, encoding);
  }
  return encoding;
}

function encodingOfName(model: string): Encoding {
  const m = model.toLowerCase().replace(/^.*\//, '');
  const known = (modelToEncodingMap as Record<string, string>)[m];
  if (known === 'cl100k_base') return 'cl100k_base';
  if (known) return 'o200k_base';
  if (/^(gpt-4(?!o|\.1|\.5)|gpt-3\.5|text-embedding-(ada|3))/.test(m)) return 'cl100k_base';
  return 'o200k_base';
}

const SMALL = 256;
const MEMO_LIMIT = 512;
const PIECE_MEMO_LIMIT = 50_000;
/** Whole texts (bootstrap files, history messages repeat every turn), per encoding. */
const memos = new Map<Encoding, Map<string, number>>();
/** Pieces of long texts ({@link segmentEnds}), per encoding. */
const pieceMemos = new Map<Encoding, Map<string, number>>();

function memoOf(store: Map<Encoding, Map<string, number>>, encoding: Encoding): Map<string, number> {
  let memo = store.get(encoding);
  if (!memo) {
    memo = new Map();
    store.set(encoding, memo);
  }
  return memo;
}

function remember(memo: Map<string, number>, key: string, n: number, limit: number): void {
  if (memo.size >= limit) memo.delete(memo.keys().next().value as string);
  memo.set(key, n);
}

/**
 * Token count of a text for a model's encoding. Texts of 256 characters or more are counted piece by piece
 * ({@link segmentEnds}: exact, except that unbroken runs and whitespace runs over 512 characters may
 * count up to about one token per 512 characters more), so no text blocks the event loop for long; pieces
 * and long texts are memoized. {@link warmTokenCounts} counts a long text ahead without blocking. Special-token strings
 * (`<|endoftext|>`) in the text count as the plain text they are.
 */
export function countTokens(text: string, model = 'gpt-4o'): number {
  if (!text) return 0;
  const encoding = encodingFor(model);
  if (text.length < SMALL) return encode(text, encoding);
  const memo = memoOf(memos, encoding);
  const hit = memo.get(text);
  if (hit !== undefined) return hit;
  const pieces = memoOf(pieceMemos, encoding);
  let n = 0;
  let start = 0;
  for (const end of segmentEnds(text)) {
    n += countPiece(text.slice(start, end), encoding, pieces);
    start = end;
  }
  remember(memo, text, n, MEMO_LIMIT);
  return n;
}

function countPiece(piece: string, encoding: Encoding, pieces: Map<string, number>): number {
  if (piece.length < 16) return encode(piece, encoding);
  let n = pieces.get(piece);
  if (n === undefined) {
    n = encode(piece, encoding);
    remember(pieces, piece, n, PIECE_MEMO_LIMIT);
  }
  return n;
}

/** Options of {@link warmTokenCounts}. */
export interface WarmOptions {
  /** Longest stretch of counting between two yields to the event loop (default 4 ms). */
  sliceMs?: number;
  /** Gives the event loop a turn (default `setImmediate`); tests inject their own. */
  yieldToLoop?: () => Promise<void>;
  /** Time source for the slices (default `performance.now`). */
  now?: () => number;
}

/**
 * Counts a text's pieces for these models' encodings ahead of time, a few milliseconds at a time with
 * the event loop served in between, so that the synchronous {@link countTokens} calls of a turn find them
 * remembered. Used on inbound messages before they reach a session.
 */
export async function warmTokenCounts(text: string, models: readonly string[], options: WarmOptions = {}): Promise<void> {
  if (text.length < SMALL) return;
  const sliceMs = options.sliceMs ?? 4;
  const now = options.now ?? (() => performance.now());
  const yieldToLoop = options.yieldToLoop ?? (() => new Promise<void>((resolve) => setImmediate(resolve)));
  const ends = segmentEnds(text);
  for (const encoding of new Set(models.map(encodingFor))) {
    const pieces = memoOf(pieceMemos, encoding);
    let sliceStart = now();
    let start = 0;
    for (const end of ends) {
      if (now() - sliceStart >= sliceMs) {
        await yieldToLoop();
        sliceStart = now();
      }
      countPiece(text.slice(start, end), encoding, pieces);
      start = end;
    }
  }
}

type Counter = (text: string, options?: { disallowedSpecial?: Set<string> }) => number;
const require = createRequire(import.meta.url);
const counters = new Map<Encoding, Counter>();
/** User text may contain `<|endoftext|>` and the like: counted as text, as providers do, never thrown on. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };

/**
 * The counter of an encoding, loaded on first use: each BPE table takes a few hundred milliseconds to load,
 * which would otherwise delay every start-up (and the CLI) before any token is counted.
 */
function counterFor(encoding: Encoding): Counter {
  let counter = counters.get(encoding);
  if (!counter) {
    counter = (require(`gpt-tokenizer/encoding/${encoding}`) as { countTokens: Counter }).countTokens;
    counters.set(encoding, counter);
  }
  return counter;
}

/** Loads the tokenizer tables of these models now, so that the first turn does not pay for them. */
export function preloadTokenizers(models: readonly string[]): void {
  for (const model of models) counterFor(encodingFor(model));
}

function encode(text: string, encoding: Encoding): number {
  return counterFor(encoding)(text, AS_TEXT);
}

/** Tokens of the tool calls of one assistant message. */
export function toolCallTokens(calls: readonly CountedToolCall[] | undefined, model: string): number {
  let n = 0;
  for (const call of calls ?? []) n += countTokens(call.name, model) + countTokens(call.arguments, model) + TOOL_CALL_OVERHEAD;
  return n;
}

/** Tokens one chat message costs in a request: content, name, tool calls, images and the per-message overhead. */
export function chatMessageTokens(message: CountedMessage, model: string): number {
  let n = MESSAGE_OVERHEAD + countTokens(message.content, model) + toolCallTokens(message.toolCalls, model);
  if (message.name) n += NAME_OVERHEAD + countTokens(message.name, model);
  const images = message.images;
  if (images) for (let i = 0; i < images.length; i++) n += (images[i] as CountedImage).tokens;
  return n;
}

/**
 * Per schema object and encoding: every new session counts the tools its requests carry, and the registry
 * makes a new schema object when a tool is registered again (schemas are never changed in place).
 */
const schemaTokens = new WeakMap<CountedToolSchema, Partial<Record<Encoding, number>>>();

/** Tokens of one tool schema as sent in `tools` (an estimate: providers render schemas in their own format). */
export function toolSchemaTokens(tool: CountedToolSchema, model: string): number {
  const encoding = encodingFor(model);
  let counts = schemaTokens.get(tool);
  const hit = counts?.[encoding];
  if (hit !== undefined) return hit;
  const n = countTokens(JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }), model) + TOOL_SCHEMA_OVERHEAD;
  if (!counts) {
    counts = {};
    schemaTokens.set(tool, counts);
  }
  counts[encoding] = n;
  return n;
}

/** Our count of a whole request: every message, the tool schemas, and the reply priming. */
export function countRequestTokens(messages: readonly CountedMessage[], tools: readonly CountedToolSchema[], model: string): number {
  let n = REQUEST_OVERHEAD;
  for (const m of messages) n += chatMessageTokens(m, model);
  for (const t of tools) n += toolSchemaTokens(t, model);
  return n;
}
