import type { ChatCompletionContentPart, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ChatMessage } from './types.ts';

/**
 * One {@link ChatMessage} as the OpenAI chat completions API takes it. A user message with images becomes content
 * parts: its text first (left out when empty), then one `image_url` part per image, in order (SPEC §15). Every
 * other message, and a user message without images, is built exactly as before images existed, so the request
 * prefix stays byte-stable.
 */
export function toOpenAIMessage(message: ChatMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system': return { role: 'system', content: message.content };
    case 'user': {
      const content = message.images?.length ? userParts(message) : message.content;
      return message.name ? { role: 'user', content, name: safeName(message.name) } : { role: 'user', content };
    }
    case 'tool': return { role: 'tool', content: message.content, tool_call_id: message.toolCallId ?? '' };
    case 'assistant':
      return message.toolCalls?.length
        ? { role: 'assistant', content: message.content || null, tool_calls: message.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) }
        : { role: 'assistant', content: message.content };
  }
}

function userParts(message: ChatMessage): ChatCompletionContentPart[] {
  const parts: ChatCompletionContentPart[] = message.content ? [{ type: 'text', text: message.content }] : [];
  for (const image of message.images ?? []) parts.push({ type: 'image_url', image_url: { url: image.url } });
  return parts;
}

/** A `name` as OpenAI accepts it: `^[A-Za-z0-9_-]{1,64}$`. */
function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'user';
}
