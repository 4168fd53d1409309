// What the context bench measures of a sequence of requests: how much of each raw body is a byte-identical
// prefix of the one before (what a provider's prompt cache could serve), and where the rest went. Also the
// planted identifiers: unique ids in user messages and tool outputs that must survive every compaction.
import { mean, percentile, round } from './stats.ts';

/** Where the messages array of an OpenAI chat completions body ends (the client writes max_completion_tokens next). */
export const MESSAGES_END = '],"max_completion_tokens"';

/** Length of the common prefix of two strings. */
export function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** Each request compared with the previous one of the sequence, as they arrive (bodies are not kept). */
export class PrefixMeter {
  readonly shares: number[] = [];
  /** Requests whose body starts with the previous request's whole messages array. */
  extended = 0;
  prefixBytes = 0;
  totalBytes = 0;
  /** Bytes after the prefix in requests that extend the previous one: messages no earlier request had. */
  newMessageBytes = 0;
  /** Bytes after the messages array (max_completion_tokens, the tools' JSON, …), never part of the prefix. */
  afterMessagesBytes = 0;
  /** Bytes of the messages after the prefix in requests that do not extend the previous one. */
  breakBytes = 0;
  private previous = '';

  add(raw: string): number | undefined {
    const previous = this.previous;
    this.previous = raw;
    if (!previous) return undefined;
    const i = commonPrefix(raw, previous);
    const end = raw.lastIndexOf(MESSAGES_END);
    this.shares.push(i / raw.length);
    this.prefixBytes += i;
    this.totalBytes += raw.length;
    this.afterMessagesBytes += raw.length - Math.max(end, i);
    if (i >= previous.lastIndexOf(MESSAGES_END)) {
      this.extended++;
      this.newMessageBytes += Math.max(0, end - i);
    } else {
      this.breakBytes += Math.max(0, end - i);
    }
    return i / raw.length;
  }

  /** The bench's `prefixShareOfPrevious` figures. */
  report(): Record<string, number> {
    const shares = this.shares;
    if (!shares.length) return {};
    return {
      mean: round(mean(shares), 4), p50: round(percentile(shares, 50), 4), p10: round(percentile(shares, 10), 4), min: round(Math.min(...shares), 4),
      bytesWeighted: round(this.prefixBytes / this.totalBytes, 4),
      requestsAt90PctOrMore: round(shares.filter((s) => s >= 0.9).length / shares.length, 4),
      extendsPreviousExactly: round(this.extended / shares.length, 4),
      prefixBreaks: shares.length - this.extended,
    };
  }

  /** Where the bytes that are not a prefix went, as shares of all bytes (they add up to 1 − bytesWeighted). */
  lost(): Record<string, number> {
    const total = this.totalBytes || 1;
    return {
      newMessages: round(this.newMessageBytes / total, 4),
      afterMessagesArray: round(this.afterMessagesBytes / total, 4),
      atPrefixBreaks: round(this.breakBytes / total, 4),
    };
  }
}

/** The text of a wire message's content (a string, or content parts). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? '').join('');
  return '';
}

/**
 * What a summary call is asked to summarize: the messages after the system message (the summary blocks stay
 * as they are), and in a merge the blocks too. The staged calls carry their part in the user message.
 */
export function summarizedPart(messages: { role: string; content: unknown }[]): string {
  const [first, ...rest] = messages;
  const merge = textOf(rest.at(-1)?.content).includes('Write one summary of the summary blocks');
  return `${merge ? textOf(first?.content) : ''}\n${rest.map((m) => textOf(m.content)).join('\n')}`;
}

/** A planted identifier: three capitals, a dash, six hex digits (nothing else in the bench looks like it). */
export const IDENTIFIER = /\b(?:REF|TRC)-[0-9a-f]{6}\b/g;

/** The distinct identifiers in a text, in order of appearance. */
export function identifiersIn(text: string): string[] {
  return [...new Set(text.match(IDENTIFIER) ?? [])];
}

/** Whether every planted identifier reaches the model, and whether any is in more than one place. */
export function checkIdentifiers(planted: readonly string[], request: { messages: { role: string; content: unknown }[] }, blockHeading: RegExp): Record<string, unknown> {
  const [system, ...rest] = request.messages;
  // The summary blocks, each on its own, then the messages after the system message, as places an identifier can be in.
  const places = [...textOf(system?.content).split(blockHeading).slice(1), rest.map((m) => JSON.stringify(m.content)).join('\n')];
  const missing: string[] = [];
  let doubled = 0;
  for (const id of planted) {
    const found = places.filter((p) => p.includes(id)).length;
    if (found === 0) missing.push(id);
    if (found > 1) doubled++;
  }
  return {
    planted: planted.length, recoverable: planted.length - missing.length, summaryBlocks: places.length - 1,
    inMoreThanOnePlace: doubled, ...(missing.length ? { missing: missing.slice(0, 10) } : {}),
  };
}
