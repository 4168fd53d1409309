import { splitImageLines, type MarkdownPart } from '../../src/core/markdown-images.ts';
import { outboundText, type OutboundMessage } from '../../src/core/message.ts';

/** A Block Kit image block (`image_url` must be a public http(s) URL; Slack fetches it). */
export interface SlackImageBlock {
  type: 'image';
  image_url: string;
  alt_text: string;
}

/** Slack's limit on an image block's `alt_text`, in characters. */
const ALT_TEXT_LIMIT = 2000;

/**
 * A reply's text and images in order: the whole text as one part when it has no image line (the renderer
 * splits it as before), else the parts of {@link splitImageLines}.
 */
export function outboundParts(message: OutboundMessage): MarkdownPart[] {
  const text = outboundText(message);
  const parts = splitImageLines(text);
  return parts.some((part) => part.kind === 'image') ? parts : [{ kind: 'text', text }];
}

/**
 * The `chat.postMessage` arguments of an image: one image block, its alt text as the block's `alt_text` and
 * as the message's fallback text (notifications, clients without blocks), else the URL.
 */
export function imageMessage(image: { url: string; alt: string }): { text: string; blocks: SlackImageBlock[] } {
  const alt = image.alt.slice(0, ALT_TEXT_LIMIT) || 'image';
  return { text: image.alt || image.url, blocks: [{ type: 'image', image_url: image.url, alt_text: alt }] };
}
