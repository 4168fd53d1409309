import { autoRetry } from '@grammyjs/auto-retry';
import { HttpError, type Transformer } from 'grammy';
import { retryDelivery, type DeliveryRetryPolicy, type RetryNotice, type RetryVerdict } from '../../src/core/delivery-retry.ts';

/**
 * Calls that are not deliveries: polling and start-up have their own loops and deadlines (getUpdates is tried
 * again by polling-retry.ts, getMe by the start timeout), a typing indicator that failed is not worth a second
 * try, and getFile runs under the media intake's deadline.
 */
const NOT_DELIVERIES = new Set(['getUpdates', 'getMe', 'getFile', 'sendChatAction', 'setWebhook', 'deleteWebhook', 'getWebhookInfo', 'close', 'logOut']);

/** An answer of Telegram that asks to try again, carried through p-retry and handed back as the answer. */
class TransientAnswer extends Error {
  constructor(readonly answer: { ok: false; error_code: number; description: string; parameters?: { retry_after?: number } }) {
    super(`Telegram answered ${answer.error_code} (${answer.description})`);
    this.name = 'TransientAnswer';
  }
}

/** Why a Bot API call may pass when tried again: a network error (grammy's HttpError), a 5xx or a 429. */
export function telegramRetryVerdict(error: unknown): RetryVerdict {
  if (error instanceof HttpError) return { reason: `network: ${error.message}` };
  if (error instanceof TransientAnswer) {
    const { error_code: code, parameters } = error.answer;
    if (code === 429) return { reason: 'rate limited (429)', retryAfterMs: Math.max(0, Number(parameters?.retry_after ?? 1)) * 1000 };
    return { reason: `Telegram answered ${code}` };
  }
  return undefined;
}

function isTransientAnswer(answer: unknown): answer is TransientAnswer['answer'] {
  if (!answer || typeof answer !== 'object') return false;
  const { ok, error_code: code } = answer as { ok?: unknown; error_code?: unknown };
  return ok === false && typeof code === 'number' && (code === 429 || code >= 500);
}

/**
 * The Bot API calls' retries, as one grammy transformer. Deliveries (sends, edits, reactions, uploads) that
 * Telegram did not take are tried again per `policy`: a connection reset or timeout (grammy's `HttpError`:
 * Telegram may not have received it), a 5xx, a 429 after its `retry_after`. The last answer is handed back
 * as it is (grammy then throws it), so the gateway never counts a request Telegram never received as sent.
 * Other calls keep grammy's auto-retry for 429 and 5xx, bounded.
 */
export function telegramCallRetry(policy: DeliveryRetryPolicy, onRetry?: (notice: RetryNotice) => void): Transformer {
  const others = autoRetry({ maxRetryAttempts: 3, maxDelaySeconds: 60, rethrowHttpErrors: true });
  return (async (prev, method, payload, signal) => {
    if (NOT_DELIVERIES.has(method)) return others(prev, method, payload, signal);
    try {
      return await retryDelivery(method, async () => {
        const answer: unknown = await prev(method, payload, signal);
        if (isTransientAnswer(answer)) throw new TransientAnswer(answer);
        return answer;
      }, telegramRetryVerdict, policy, { ...(onRetry ? { onRetry } : {}), ...(signal ? { signal: signal as AbortSignal } : {}) });
    } catch (error) {
      if (error instanceof TransientAnswer) return error.answer;
      throw error;
    }
  }) as Transformer;
}
