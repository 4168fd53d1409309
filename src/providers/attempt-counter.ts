/**
 * Counts the HTTP attempts of each call by its correlation header, at the fetch layer, so that an SDK's own
 * retries (429, 5xx, connection errors) are visible: give {@link AttemptCounter.fetch} to the client.
 */
export class AttemptCounter {
  private readonly attempts = new Map<string, number>();
  private readonly header: string;

  constructor(correlationHeader: string) {
    this.header = correlationHeader.toLowerCase();
  }

  /** `fetch`, counting each request that carries the correlation header. */
  readonly fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const headers = init?.headers;
    const id = headers instanceof Headers ? headers.get(this.header) : new Headers(headers).get(this.header);
    if (id) this.attempts.set(id, (this.attempts.get(id) ?? 0) + 1);
    return fetch(input, init);
  };

  /** Attempts of a call beyond its first. */
  retriesOf(correlationId: string): number {
    return Math.max(0, (this.attempts.get(correlationId) ?? 1) - 1);
  }

  /** Forgets a call's count (before it starts, and once it ended). */
  forget(correlationId: string): void {
    this.attempts.delete(correlationId);
  }
}
