/** Base of every Switchboard error: a stable `code` and a message that says what to do. */
export class SwitchboardError extends Error {
  readonly code: string;
  /** HTTP status to answer with when the error reaches the API. */
  readonly status: number;
  constructor(code: string, message: string, options?: { cause?: unknown; status?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = options?.status ?? 500;
  }
}

/** The configuration is invalid; start-up stops. */
export class ConfigError extends SwitchboardError {
  readonly issues: string[];
  constructor(message: string, issues: string[] = []) {
    super('CONFIG_INVALID', message, { status: 500 });
    this.issues = issues;
  }
}

/** A request had bad input (HTTP 400). */
export class BadRequestError extends SwitchboardError {
  constructor(message: string, code = 'BAD_REQUEST') {
    super(code, message, { status: 400 });
  }
}

/** Something named does not exist (HTTP 404). */
export class NotFoundError extends SwitchboardError {
  constructor(message: string, code = 'NOT_FOUND') {
    super(code, message, { status: 404 });
  }
}

/** A session key could not be built or parsed. */
export class SessionKeyError extends SwitchboardError {
  constructor(message: string) {
    super('SESSION_KEY_INVALID', message, { status: 400 });
  }
}

/** The session store failed (disk, SQLite). */
export class StoreError extends SwitchboardError {
  constructor(message: string, cause?: unknown) {
    super('STORE_FAILED', message, { cause, status: 500 });
  }
}

/**
 * Why a provider call failed: rate limited (429), overloaded (Anthropic's 529 / `overloaded_error`), timed out,
 * unreachable, refused the key (401/403), the prompt is longer than the window, aborted by us, or anything else
 * (`PROVIDER_FAILED`, with the HTTP status when there was one).
 */
export type ProviderErrorCode = 'PROVIDER_FAILED' | 'PROVIDER_RATE_LIMITED' | 'PROVIDER_OVERLOADED' | 'PROVIDER_TIMEOUT' | 'PROVIDER_UNAVAILABLE'
  | 'PROVIDER_AUTH' | 'CONTEXT_OVERFLOW' | 'PROVIDER_ABORTED';

/** An LLM provider call failed. `retryable` tells whether trying again may help. */
export class ProviderError extends SwitchboardError {
  readonly retryable: boolean;
  readonly providerStatus?: number;
  constructor(
    code: ProviderErrorCode,
    message: string,
    options: { status?: number; retryable?: boolean; cause?: unknown } = {},
  ) {
    super(code, message, { cause: options.cause, status: 502 });
    this.providerStatus = options.status;
    this.retryable = options.retryable ?? false;
  }
}

/**
 * The model chosen for a session with `/model` failed (rate limited, overloaded, down, or refusing every key). A
 * chosen model never falls back to another (SPEC §18), so the user is told, in this message, what happened.
 */
export class ChosenModelError extends SwitchboardError {
  constructor(ref: string, cause: ProviderError) {
    super('CHOSEN_MODEL_FAILED', `The model chosen for this conversation with /model, ${ref}, failed: ${whatFailed(cause)}. It does not fall back to another model; try again later, or go back to the agent's model with /model default.`, { cause, status: 502 });
  }
}

function whatFailed(error: ProviderError): string {
  switch (error.code) {
    case 'PROVIDER_RATE_LIMITED': return 'the provider is rate limiting';
    case 'PROVIDER_OVERLOADED': return 'the provider is overloaded';
    case 'PROVIDER_TIMEOUT': return 'the provider did not answer in time';
    case 'PROVIDER_UNAVAILABLE': return 'the provider is unreachable';
    case 'PROVIDER_AUTH': return 'the provider refused its API key';
    default: return error.providerStatus ? `the provider answered HTTP ${error.providerStatus}` : 'the call failed';
  }
}

/** A channel could not start or deliver (bad token, unreachable API). */
export class ChannelError extends SwitchboardError {
  constructor(code: string, message: string, cause?: unknown) {
    super(code, message, { cause, status: 502 });
  }
}

/** Another process owns the state folder (SPEC §13): one gateway per `stateDir`. */
export class StateLockedError extends SwitchboardError {
  readonly owner?: { pid: number; role: string; command: string; url?: string; port?: number };
  constructor(stateDir: string, owner?: { pid: number; role: string; command: string; url?: string; port?: number }) {
    const fix = `Stop it first${owner ? ` (kill ${owner.pid})` : ''}, or give this one its own state folder with SWITCHBOARD_STATE_DIR.`;
    let message: string;
    if (!owner) message = `Another process holds the lock of the state folder ${stateDir}. ${fix}`;
    else if (owner.role === 'gateway') {
      const where = owner.port !== undefined ? `port ${owner.port}${owner.url ? ` (${owner.url})` : ''}` : 'still starting';
      message = `A Switchboard gateway already runs on the state folder ${stateDir}: pid ${owner.pid}, ${where}. ${fix}`;
    } else message = `"${owner.command}" (pid ${owner.pid}) is using the state folder ${stateDir} without a gateway. ${fix}`;
    super('STATE_LOCKED', message, { status: 409 });
    this.owner = owner;
  }
}

/**
 * Cluster mode: this replica no longer owns the session: its lane connection was closed (killed, or ended by
 * `idle_session_timeout` after the process froze), so PostgreSQL released the session's lock and another
 * replica may run it. Nothing more of this turn may be written or sent. Stores pass it on unwrapped.
 */
export class LeaseLostError extends SwitchboardError {
  constructor(key: string, cause?: unknown) {
    super('LEASE_LOST', `This replica lost the lock of session ${key} (its database connection ended); another replica takes the session over.`, { cause });
  }
}

/** The gateway is shutting down and takes no new work (HTTP 503). */
export class ShuttingDownError extends SwitchboardError {
  constructor() {
    super('SHUTTING_DOWN', 'The gateway is shutting down; try again once it is back.', { status: 503 });
  }
}

/** A turn was stopped with /stop or by shutdown. */
export class TurnAbortedError extends SwitchboardError {
  constructor(reason = 'stopped') {
    super('TURN_ABORTED', `The turn was ${reason}.`, { status: 499 });
  }
}

/** True for an AbortSignal-triggered rejection. */
export function isAbortError(error: unknown): boolean {
  if (error instanceof TurnAbortedError) return true;
  if (error instanceof ProviderError && error.code === 'PROVIDER_ABORTED') return true;
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'APIUserAbortError');
}

/** A call or a message refused by a budget or a rate limit (SPEC §14); the message is meant for the user. */
export class BudgetExceededError extends SwitchboardError {
  readonly reason: 'session_budget' | 'run_budget' | 'rate_limit';
  constructor(reason: 'session_budget' | 'run_budget' | 'rate_limit', message: string) {
    super(reason === 'rate_limit' ? 'RATE_LIMITED' : 'BUDGET_EXCEEDED', message, { status: 429 });
    this.reason = reason;
  }
}

/**
 * An attachment could not be fetched or used (SPEC §15). `reason` is what the model's line says: `too_large`,
 * `download_failed`, `timeout`, `undecodable`, `unsupported`. Never costs the message: it becomes a listed line.
 */
export class MediaFetchError extends SwitchboardError {
  readonly reason: 'too_large' | 'download_failed' | 'timeout' | 'undecodable' | 'unsupported';
  constructor(reason: MediaFetchError['reason'], message: string, options?: { cause?: unknown; status?: number }) {
    super(`MEDIA_${reason.toUpperCase()}`, message, { cause: options?.cause, status: options?.status ?? 422 });
    this.reason = reason;
  }
}
