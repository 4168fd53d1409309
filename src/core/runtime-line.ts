/** Starts the line, at the head of each user message of a request, that carries the time it was sent. */
export const RUNTIME_PREFIX = '[Runtime]';

/** A request's user message content without its runtime line: what the person wrote. */
export function withoutRuntimeLine(content: string): string {
  return content.startsWith(RUNTIME_PREFIX) ? content.slice(content.indexOf('\n') + 1) : content;
}
