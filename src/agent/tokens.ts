import { createRequire } from 'node:module';
import { modelToEncodingMap } from 'gpt-tokenizer/mapping';
import type { ChatMessage, ToolSchema } from '../providers/types.ts';
import type { ToolCall } from '../sessions/transcript.ts';

/** Tokenizer encodings we count with. */
export type Encoding = 'o200k_base' | 'cl100k_base';

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

/**
 * The encoding for a model. Known OpenAI model names use gpt-tokenizer's own model table; other names are
 * matched by family (`gpt-4`, `gpt-3.5`, `text-embedding-ada/3` → `cl100k_base`; `gpt-4o`, `gpt-4.1`,
 * `gpt-5`, `o1`…`o4`, `gpt-oss` → `o200k_base`). **Fallback:** any other model (Llama, Qwen, Mistral,
 * Claude, Gemini, …) is counted with `o200k_base`, the closest general-purpose BPE we ship; the per-model
 * calibration factor ({@link TokenCalibration}) then corrects the difference using the usage the provider reports.
 */
export function encodingFor(model: string): Encoding {
  const m = model.toLowerCase().replace(/^.*\//, '');
  const known = (modelToEncodingMap as Record<string, string>)[m];
  if (known === 'cl100k_base') return 'cl100k_base';
  if (known) return 'o200k_base';
  if (/^(gpt-4(?!o|\.1|\.5)|gpt-3\.5|text-embedding-(ada|3))/.test(m)) return 'cl100k_base';
  return 'o200k_base';
}

const SMALL = 256;
const memo = new Map<string, number>();
const MEMO_LIMIT = 512;

/** Exact token count of a text for a model's encoding (long texts are memoized; bootstrap files repeat every turn). */
export function countTokens(text: string, model = 'gpt-4o'): number {
  if (!text) return 0;
  const encoding = encodingFor(model);
  if (text.length < SMALL) return encode(text, encoding);
  const key = `${encoding}\u0000${text}`;
  const hit = memo.get(key);
  if (hit !== undefined) return hit;
  const n = encode(text, encoding);
  if (memo.size >= MEMO_LIMIT) memo.delete(memo.keys().next().value as string);
  memo.set(key, n);
  return n;
}

type Counter = (text: string) => number;
const require = createRequire(import.meta.url);
const counters = new Map<Encoding, Counter>();

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
  return counterFor(encoding)(text);
}

/** Tokens of the tool calls of one assistant message. */
export function toolCallTokens(calls: readonly ToolCall[] | undefined, model: string): number {
  let n = 0;
  for (const call of calls ?? []) n += countTokens(call.name, model) + countTokens(call.arguments, model) + TOOL_CALL_OVERHEAD;
  return n;
}

/** Tokens one chat message costs in a request: content, name, tool calls and the per-message overhead. */
export function chatMessageTokens(message: ChatMessage, model: string): number {
  let n = MESSAGE_OVERHEAD + countTokens(message.content, model) + toolCallTokens(message.toolCalls, model);
  if (message.name) n += NAME_OVERHEAD + countTokens(message.name, model);
  return n;
}

/** Tokens of one tool schema as sent in `tools` (an estimate: providers render schemas in their own format). */
export function toolSchemaTokens(tool: ToolSchema, model: string): number {
  return countTokens(JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }), model) + TOOL_SCHEMA_OVERHEAD;
}

/** Our count of a whole request: every message, the tool schemas, and the reply priming. */
export function countRequestTokens(messages: readonly ChatMessage[], tools: readonly ToolSchema[], model: string): number {
  let n = REQUEST_OVERHEAD;
  for (const m of messages) n += chatMessageTokens(m, model);
  for (const t of tools) n += toolSchemaTokens(t, model);
  return n;
}
