import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import { ProviderError } from '../core/errors.ts';

/** A 400 that says the prompt does not fit the model's window. */
const OVERFLOW = /prompt is too long|exceeds? (?:the )?(?:model's )?context|context window|context length|too many (?:input )?tokens/i;

/**
 * Any failure of an Anthropic call as a {@link ProviderError}: 429 → `PROVIDER_RATE_LIMITED`, 529 or an
 * `overloaded_error` (also a stream's `error` event) → `PROVIDER_OVERLOADED`, a timeout → `PROVIDER_TIMEOUT`, no
 * connection → `PROVIDER_UNAVAILABLE` (all four retryable), 401/403 → `PROVIDER_AUTH`, a prompt longer than the
 * window → `CONTEXT_OVERFLOW`, our abort → `PROVIDER_ABORTED`, other 5xx → retryable `PROVIDER_FAILED`, the rest
 * `PROVIDER_FAILED`. `apiKey` is masked out of every message that quotes the server.
 */
export function mapAnthropicError(error: unknown, providerId: string, apiKey = ''): ProviderError {
  if (error instanceof ProviderError) return error;
  const redact = (text: string) => (apiKey.length >= 8 ? text.split(apiKey).join('***') : text);
  if (error instanceof APIUserAbortError || (error instanceof Error && error.name === 'AbortError')) {
    return new ProviderError('PROVIDER_ABORTED', 'The call was aborted.', { cause: error });
  }
  if (error instanceof APIConnectionTimeoutError) {
    return new ProviderError('PROVIDER_TIMEOUT', `Provider "${providerId}" did not answer in time; it may be slow or overloaded (raise its timeout, or try again).`, { retryable: true, cause: error });
  }
  if (error instanceof APIConnectionError) {
    return new ProviderError('PROVIDER_UNAVAILABLE', `Provider "${providerId}" is unreachable (${redact(error.message)}); check its baseUrl and the network.`, { retryable: true, cause: error });
  }
  if (error instanceof APIError) {
    const status = error.status as number | undefined;
    const type = error.type ?? undefined;
    const detail = redact(error.apiMessage ?? error.message);
    if (status === 529 || type === 'overloaded_error') {
      return new ProviderError('PROVIDER_OVERLOADED', `Provider "${providerId}" is overloaded${status ? ` (HTTP ${status})` : ''}: ${detail}`, { status, retryable: true, cause: error });
    }
    if (status === 429 || type === 'rate_limit_error') {
      return new ProviderError('PROVIDER_RATE_LIMITED', `Provider "${providerId}" is rate limiting (HTTP 429): ${detail}`, { status, retryable: true, cause: error });
    }
    if (status === 401 || status === 403 || type === 'authentication_error' || type === 'permission_error') {
      return new ProviderError('PROVIDER_AUTH',
        `Provider "${providerId}" refused the API key (HTTP ${status ?? '?'}: ${detail}); check providers.${providerId}.apiKey / apiKeys (or ANTHROPIC_API_KEY).`,
        { status, cause: error });
    }
    if ((status === 400 || status === 413 || type === 'invalid_request_error') && OVERFLOW.test(detail)) {
      return new ProviderError('CONTEXT_OVERFLOW', `The conversation is longer than the model's context window: ${detail}`, { status, cause: error });
    }
    // A stream's `error` event has no status: the server failed after it had started answering.
    const retryable = status === undefined ? type === 'api_error' : status >= 500;
    return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" answered ${status ? `HTTP ${status}` : `an error${type ? ` (${type})` : ''}`}: ${detail}`, { status, retryable, cause: error });
  }
  return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" failed: ${redact((error as Error)?.message ?? String(error))}`, { cause: error });
}
