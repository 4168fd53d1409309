import type { InboundMessage, MediaRecord } from '../core/message.ts';
import type { GroupContextItem } from './turn-input.ts';

/**
 * What a user message says to the model: its text, what its media became (lines, inlined documents; images are
 * added when the request is built, see {@link imageLines}), the quoted reply, and kept group context. Attachments
 * no media intake looked at are listed.
 */
export function userContent(message: InboundMessage, groupContext?: GroupContextItem[]): string {
  let text = message.text;
  const notes = message.media ? message.mediaNotes ?? [] : message.attachments.map((a) => `[attachment: ${a.type}${a.name ? ` "${a.name}"` : ''}${a.size ? `, ${a.size} bytes` : ''}]`);
  if (notes.length) {
    const list = notes.join('\n');
    text = text ? `${text}\n${list}` : list;
  }
  if (message.replyTo?.text) text = `[replying to: ${message.replyTo.text.slice(0, 500)}]\n${text}`;
  if (groupContext?.length) {
    const earlier = groupContext.map((m) => `${m.name}: ${m.text}`).join('\n');
    text = `[Earlier messages in this chat]\n${earlier}\n\n[Message to you${message.sender.name ? ` from ${message.sender.name}` : ''}]\n${text}`;
  }
  return text;
}

/** The lines of a user entry's images not shown as images (the model does not see, a compaction passed them, a file is gone). */
export function imageLines(media: readonly MediaRecord[] | undefined, shown?: ReadonlySet<MediaRecord>): string {
  if (!media) return '';
  let out = '';
  for (const record of media) if (record.as === 'image' && !shown?.has(record)) out += `\n${record.line}`;
  return out;
}
