import pRetry from 'p-retry';

/** How a channel retries a platform call that the platform did not take (SPEC §16: delivery never drops an answer). */
export interface DeliveryRetryPolicy {
  /** Attempts in all, the first included (`delivery.maxAttempts`, default 8). */
  maxAttempts: number;
  /** Wait after the first failure; doubles after each one (with jitter), up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** Waits for a platform's `retry_after` (tests pass their own to observe it without sleeping). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** A reply the platform never took, even after the channel's retries (SPEC §16: logged, counted, shown). */
export interface DeliveryFailure {
  /** ISO time it was given up on. */
  at: string;
  channel: string;
  accountId: string;
  chatId: string;
  correlationId?: string;
  /** The last error's code and message. */
  code?: string;
  error: string;
}

/** The defaults of `delivery` (SPEC §16). */
export const DEFAULT_DELIVERY_RETRY: DeliveryRetryPolicy = { maxAttempts: 8, baseDelayMs: 500, maxDelayMs: 30_000 };

/**
 * What a channel says of a failed call: `undefined` when trying again cannot help (the platform refused the
 * request itself: bad request, no rights, chat gone), else why it may pass and how long the platform asked
 * to wait (a 429's `retry_after`).
 */
export type RetryVerdict = undefined | { reason: string; retryAfterMs?: number };

/** What {@link retryDelivery} reports before each new attempt. */
export interface RetryNotice {
  what: string;
  attempt: number;
  attemptsLeft: number;
  reason: string;
  error: unknown;
}

/** The longest `retry_after` honoured; a platform asking for longer gets the request back as failed. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { signal?.removeEventListener('abort', abort); resolve(); }, ms);
    const abort = () => { clearTimeout(timer); reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted')); };
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * Runs one platform call, trying again what the platform did not take (a reset connection, a timeout, a 5xx,
 * a 429 after its `retry_after`) with exponential backoff, up to `maxAttempts` in all. A refusal that
 * `classify` does not call transient is thrown at once, and so is the last failure.
 */
export async function retryDelivery<T>(
  what: string,
  attempt: () => Promise<T>,
  classify: (error: unknown) => RetryVerdict,
  policy: DeliveryRetryPolicy,
  hooks: { onRetry?: (notice: RetryNotice) => void; signal?: AbortSignal } = {},
): Promise<T> {
  const sleep = policy.sleep ?? defaultSleep;
  return pRetry(attempt, {
    retries: Math.max(0, policy.maxAttempts - 1),
    minTimeout: policy.baseDelayMs,
    maxTimeout: policy.maxDelayMs,
    factor: 2,
    randomize: true,
    ...(hooks.signal ? { signal: hooks.signal } : {}),
    shouldRetry: ({ error }) => classify(error) !== undefined,
    onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
      const verdict = classify(error);
      if (!verdict || retriesLeft === 0) return;
      hooks.onRetry?.({ what, attempt: attemptNumber, attemptsLeft: retriesLeft, reason: verdict.reason, error });
      // The platform's own wait comes first; the backoff p-retry adds after it keeps a crowd from returning at once.
      if (verdict.retryAfterMs !== undefined && verdict.retryAfterMs > 0) await sleep(Math.min(verdict.retryAfterMs, MAX_RETRY_AFTER_MS), hooks.signal);
    },
  });
}

/** Error codes of a connection that broke or never formed (Node's net layer and undici). */
const NETWORK_CODES = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'ENETUNREACH', 'EHOSTUNREACH', 'EAI_AGAIN', 'ENOTFOUND',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CLOSED',
]);

/**
 * True for an error of the connection itself (reset, refused, timed out, closed), looked for along the
 * `cause` chain, where fetch, undici and the SDKs keep it.
 */
export function isNetworkError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
    if (current.name === 'TimeoutError' || (current.name === 'TypeError' && current.message === 'fetch failed')) return true;
    if (/socket hang up|other side closed|ECONNRESET/i.test(current.message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
