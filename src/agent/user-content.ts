import type { InboundMessage } from '../core/message.ts';
import type { GroupContextItem } from './turn-input.ts';

/** What a user message says to the model: its text, listed attachments, the quoted reply, and kept group context. */
export function userContent(message: InboundMessage, groupContext?: GroupContextItem[]): string {
  let text = message.text;
  if (message.attachments.length) {
    const list = message.attachments.map((a) => `[attachment: ${a.type}${a.name ? ` "${a.name}"` : ''}${a.size ? `, ${a.size} bytes` : ''}]`).join('\n');
    text = text ? `${text}\n${list}` : list;
  }
  if (message.replyTo?.text) text = `[replying to: ${message.replyTo.text.slice(0, 500)}]\n${text}`;
  if (groupContext?.length) {
    const earlier = groupContext.map((m) => `${m.name}: ${m.text}`).join('\n');
    text = `[Earlier messages in this chat]\n${earlier}\n\n[Message to you${message.sender.name ? ` from ${message.sender.name}` : ''}]\n${text}`;
  }
  return text;
}
