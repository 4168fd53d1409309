/** One Server-Sent Event, its data parsed as JSON. */
export interface SseEvent {
  event: string;
  data: unknown;
  retry?: number;
}

/** Reads a `text/event-stream` response event by event (comment lines are skipped). */
export interface SseReader {
  next(): Promise<SseEvent>;
  /** The next event matching `match`, skipping the others. */
  until(match: (event: SseEvent) => boolean): Promise<SseEvent>;
  /** Every event until the stream ends. */
  rest(): Promise<SseEvent[]>;
  cancel(): Promise<void>;
}

export function readSse(response: Response): SseReader {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const read = async (): Promise<SseEvent | undefined> => {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const lines = block.split('\n').filter((l) => !l.startsWith(':'));
        if (!lines.length) continue;
        const field = (name: string) => lines.filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).replace(/^ /, ''));
        const retry = field('retry')[0];
        return { event: field('event')[0] ?? 'message', data: JSON.parse(field('data').join('\n') || 'null'), ...(retry ? { retry: Number(retry) } : {}) };
      }
      const { done, value } = await reader.read();
      if (done) return undefined;
      buffer += decoder.decode(value, { stream: true });
    }
  };
  const sse: SseReader = {
    next: async () => {
      const event = await read();
      if (!event) throw new Error('the event stream ended');
      return event;
    },
    until: async (match) => {
      for (;;) {
        const event = await sse.next();
        if (match(event)) return event;
      }
    },
    rest: async () => {
      const events: SseEvent[] = [];
      for (let e = await read(); e; e = await read()) events.push(e);
      return events;
    },
    cancel: () => reader.cancel().catch(() => undefined),
  };
  return sse;
}
