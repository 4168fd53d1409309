import type {
  ContentBlockParam, ImageBlockParam, MessageParam, TextBlockParam, Tool, ToolResultBlockParam, ToolUseBlockParam,
} from '@anthropic-ai/sdk/resources/messages';
import type { ChatImage, ChatMessage, ToolSchema } from './types.ts';

/** The most `cache_control` breakpoints one Messages API request may carry. */
export const MAX_CACHE_BREAKPOINTS = 4;

/** A request's conversation as the Messages API takes it: the top-level `system` blocks and the `messages`. */
export interface AnthropicConversation {
  system: TextBlockParam[];
  messages: MessageParam[];
}

/** The Messages API's image media types; another mime in a data URL is sent as it is and refused upstream. */
type ImageMediaType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';

const EPHEMERAL = { type: 'ephemeral' } as const;

/**
 * Our {@link ChatMessage}s as Anthropic's `system` + `messages`, with prompt-cache breakpoints (SPEC §18).
 *
 * - System messages (wherever they stand) become the top-level `system` text blocks, in order; each is split at its
 *   `cacheBreaks` offsets into separate blocks (the system prompt, then each compaction summary block, then the rest).
 * - A user message is its text (prefixed `[name]: ` when it has a `name`, so group speakers stay told apart), then
 *   its images (`data:` URLs as base64 sources, other URLs as url sources).
 * - An assistant message is its text, then one `tool_use` block per tool call; `input` is the parsed arguments, and
 *   arguments that are not a JSON object are sent as `{ _raw: "<the text>" }` so a model's broken JSON never
 *   fails the request.
 * - Tool results are `tool_result` blocks in a user message; consecutive messages that land on the same role
 *   (tool results then the user's next words, two user messages) are merged into one message, tool results first.
 * - Text that is empty or only whitespace is never sent as a block (the API refuses it); a message left with no
 *   block (an assistant answer that said nothing) is left out.
 *
 * Breakpoints ({@link MAX_CACHE_BREAKPOINTS} at most, one per block, coinciding ones sent once): the first system
 * block (the cached prefix is tools + system prompt); the last system block that ends at a cache break, when it is
 * not the first (the last compaction summary); the last block of the message before the final run of user input
 * (what the previous request already sent); and the last block of the last message. The same messages always
 * give the same blocks; earlier blocks never change when messages are appended (only where the breakpoints sit).
 */
export function toAnthropicConversation(messages: readonly ChatMessage[]): AnthropicConversation {
  const system: TextBlockParam[] = [];
  let summaryEnd = -1;
  const out: { role: 'user' | 'assistant'; content: ContentBlockParam[] }[] = [];
  for (const message of messages) {
    if (message.role === 'system') {
      for (const part of systemParts(message)) {
        if (!hasText(part.text)) continue;
        system.push({ type: 'text', text: part.text });
        if (part.stable) summaryEnd = system.length - 1;
      }
      continue;
    }
    const role = message.role === 'assistant' ? 'assistant' : 'user';
    const blocks = blocksOf(message);
    if (!blocks.length) continue;
    const last = out[out.length - 1];
    if (last?.role === role) {
      // Tool results must lead the user message that follows the tool calls.
      if (message.role === 'tool') {
        const at = last.content.findIndex((b) => b.type !== 'tool_result');
        if (at >= 0) last.content.splice(at, 0, ...blocks);
        else last.content.push(...blocks);
      } else last.content.push(...blocks);
    } else out.push({ role, content: blocks });
  }

  let marks = 0;
  const mark = (block: { cache_control?: unknown } | undefined) => {
    if (!block || block.cache_control || marks >= MAX_CACHE_BREAKPOINTS) return;
    block.cache_control = EPHEMERAL;
    marks++;
  };
  mark(system[0]);
  if (summaryEnd > 0) mark(system[summaryEnd]);
  const lastIndex = out.length - 1;
  let stable = lastIndex;
  while (stable >= 0 && out[stable]?.role === 'user') stable--;
  if (stable >= 0 && stable < lastIndex) mark(lastBlock(out[stable]));
  mark(lastBlock(out[lastIndex]));
  return { system, messages: out };
}

/** Our tool schemas as the Messages API's tools. */
export function toAnthropicTools(tools: readonly ToolSchema[]): Tool[] {
  return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters as Tool['input_schema'] }));
}

/**
 * A tool call's `arguments` as a `tool_use` input: the parsed JSON object, or `{ _raw: arguments }` when the text
 * does not parse or is not an object (the API wants an object; the model sees what it sent). Empty = `{}`.
 */
export function toolInputOf(args: string): Record<string, unknown> {
  if (!args.trim()) return {};
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through: sent as raw text
  }
  return { _raw: args };
}

/** A system message cut at its cache breaks; `stable` = the part ends at a break (a byte-stable part). */
function systemParts(message: ChatMessage): { text: string; stable: boolean }[] {
  const text = message.content;
  const parts: { text: string; stable: boolean }[] = [];
  let from = 0;
  for (const at of message.cacheBreaks ?? []) {
    if (!Number.isInteger(at) || at <= from || at > text.length) continue;
    parts.push({ text: text.slice(from, at), stable: true });
    from = at;
  }
  if (from < text.length || !parts.length) parts.push({ text: text.slice(from), stable: false });
  return parts;
}

function blocksOf(message: ChatMessage): ContentBlockParam[] {
  switch (message.role) {
    case 'tool': {
      const block: ToolResultBlockParam = { type: 'tool_result', tool_use_id: message.toolCallId ?? '' };
      if (hasText(message.content)) block.content = message.content;
      return [block];
    }
    case 'assistant': {
      const blocks: ContentBlockParam[] = hasText(message.content) ? [{ type: 'text', text: message.content }] : [];
      for (const call of message.toolCalls ?? []) {
        const use: ToolUseBlockParam = { type: 'tool_use', id: call.id, name: call.name, input: toolInputOf(call.arguments) };
        blocks.push(use);
      }
      return blocks;
    }
    default: {
      const text = message.name ? `[${message.name}]: ${message.content}` : message.content;
      const blocks: ContentBlockParam[] = hasText(text) ? [{ type: 'text', text }] : [];
      for (const image of message.images ?? []) blocks.push(imageBlock(image));
      return blocks;
    }
  }
}

function imageBlock(image: ChatImage): ImageBlockParam {
  const data = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(image.url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1] as ImageMediaType, data: data[2] ?? '' } };
  return { type: 'image', source: { type: 'url', url: image.url } };
}

function lastBlock(message: { content: ContentBlockParam[] } | undefined): { cache_control?: unknown } | undefined {
  return message?.content[message.content.length - 1] as { cache_control?: unknown } | undefined;
}

function hasText(text: string): boolean {
  return /\S/.test(text);
}
