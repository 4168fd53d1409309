import type { Clock } from '../core/clock.ts';
import { ConfigError, ProviderError } from '../core/errors.ts';
import type { CooldownBook } from './cooldowns.ts';
import type { CallOptions, FailedAttempt, Provider, ProviderKind, ProviderRequest, ProviderResponse } from './types.ts';

/** One model of a failover chain: a configured provider, the model to ask it for, and one Provider per API key. */
export interface FailoverTarget {
  /** The configured provider (`providers.<id>`). */
  providerId: string;
  /** Sent as the request's model on every call to this target (the request's own model is ignored). */
  model: string;
  /** One Provider per API key of the provider, in key order: index 0 = `apiKey`, then `apiKeys`. At least one. */
  credentials: Provider[];
}

/** A credential of a chain: which provider, model and key. */
export interface FailoverCandidate {
  providerId: string;
  model: string;
  keyIndex: number;
}

/** A call of a chain failed with a failover error and the chain moved on (`to`) or had nothing left (`to` absent). */
export interface FailoverEvent {
  from: FailoverCandidate;
  /** The candidate tried next; absent when nothing was left and the call fails. */
  to?: FailoverCandidate;
  /** The ProviderError code of the failure. */
  code: string;
  message: string;
  /** Epoch ms (the chain's clock). */
  at: number;
}

/** Options of {@link FailoverProvider}. */
export interface FailoverProviderOptions {
  /** The agent's model first, then its fallbacks, in order. At least one. */
  targets: FailoverTarget[];
  /** Shared by every chain of the gateway: a key cooled by one agent's call is skipped by the others. */
  cooldowns: CooldownBook;
  clock: Clock;
  /** The chain is a model the user chose (`/model`): informational; such a chain has only that one target. */
  userChosen?: boolean;
  /** Told of every failover (synchronously; an exception it throws is ignored). */
  onFailover?: (event: FailoverEvent) => void;
}

/**
 * An error a failover chain threw: the last call's error, with every call of the chain that failed, in order (the
 * last entry is this error's own call). Read it with {@link failedAttemptsOf}.
 */
export type FailoverChainError = ProviderError & { failedAttempts: FailedAttempt[] };

const FAILOVER_CODES = new Set(['PROVIDER_RATE_LIMITED', 'PROVIDER_OVERLOADED', 'PROVIDER_TIMEOUT', 'PROVIDER_UNAVAILABLE', 'PROVIDER_AUTH']);

/**
 * True when another key or model may answer where this call failed: a rate limit, an overload, a timeout, an
 * unreachable server, a refused key, or a 5xx. Not a context overflow (the caller compacts), an abort, or another 4xx.
 */
export function isFailoverError(error: unknown): error is ProviderError {
  if (!(error instanceof ProviderError)) return false;
  return FAILOVER_CODES.has(error.code) || (error.code === 'PROVIDER_FAILED' && (error.providerStatus ?? 0) >= 500);
}

/** The calls of a failover chain that failed, as a thrown error carries them ({@link FailoverChainError}). */
export function failedAttemptsOf(error: unknown): FailedAttempt[] | undefined {
  const attempts = (error as Partial<FailoverChainError> | null | undefined)?.failedAttempts;
  return Array.isArray(attempts) ? attempts : undefined;
}

interface Candidate extends FailoverCandidate {
  provider: Provider;
  /** `providerId` and `keyIndex`: the credential, as cooldowns know it. */
  credential: string;
}

/**
 * A Provider that calls an ordered chain of models (SPEC §18): each target's keys in order, skipping keys that are
 * cooling down, then the next target. A call that fails with a failover error ({@link isFailoverError}) cools its key
 * down and the next candidate is tried, once each per call; every other error is thrown at once. While another
 * candidate is left, a call is made with `maxRetries: 0` (fail fast, move on); the last candidate gets the caller's.
 * When every key is cooling down, the one whose cooldown ends first is tried. A streamed call that already passed text
 * on is not failed over (the user saw it).
 *
 * Answers carry `providerId` (who answered), `failedAttempts` (possibly empty) and `retries` summed over the chain.
 * Errors carry `failedAttempts` ({@link FailoverChainError}).
 */
export class FailoverProvider implements Provider {
  readonly id: string;
  readonly kind: ProviderKind;
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;
  readonly userChosen: boolean;
  readonly targets: readonly FailoverTarget[];
  /** The first target's first key's model list. */
  readonly listModels?: (signal?: AbortSignal) => Promise<string[]>;
  /** The first target's first key's transcription, when it offers one (no failover). */
  readonly transcribe?: Provider['transcribe'];
  private readonly candidates: Candidate[];
  private readonly options: FailoverProviderOptions;

  constructor(options: FailoverProviderOptions) {
    const first = options.targets[0];
    const firstKey = first?.credentials[0];
    if (!first || !firstKey) throw new ConfigError('A failover chain needs at least one target with at least one key.');
    const empty = options.targets.find((t) => t.credentials.length === 0);
    if (empty) throw new ConfigError(`Failover target ${empty.providerId}/${empty.model} has no key.`);
    this.options = options;
    this.targets = options.targets;
    this.userChosen = options.userChosen ?? false;
    this.id = first.providerId;
    this.kind = firstKey.kind;
    this.model = first.model;
    this.contextWindow = firstKey.contextWindow;
    this.maxTokens = firstKey.maxTokens;
    if (firstKey.listModels) this.listModels = (signal) => firstKey.listModels!(signal);
    if (firstKey.transcribe) this.transcribe = (audio, o) => firstKey.transcribe!(audio, o);
    this.candidates = options.targets.flatMap((t) => t.credentials.map((provider, keyIndex) => ({
      providerId: t.providerId, model: t.model, keyIndex, provider, credential: `${keyIndex}:${t.providerId}`,
    })));
  }

  async complete(request: ProviderRequest, options: CallOptions = {}): Promise<ProviderResponse> {
    const { cooldowns, clock } = this.options;
    const failed: FailedAttempt[] = [];
    const tried = new Set<Candidate>();
    /** Credentials this call cooled down, with the model and code of the failure (see `usable`). */
    const cooledHere = new Map<string, { model: string; code: string }>();
    const usable = (c: Candidate): boolean => {
      if (tried.has(c)) return false;
      if (cooldowns.coolingUntil(c.providerId, c.keyIndex) === undefined) return true;
      // Rate limits and overload are often per model: a key this call cooled for one model may serve another
      // (not after an auth refusal). A key cooled before this call is skipped for all its models.
      const here = cooledHere.get(c.credential);
      return here !== undefined && here.model !== c.model && here.code !== 'PROVIDER_AUTH';
    };
    const nextAfter = (): Candidate | undefined => this.candidates.find(usable);

    let current = nextAfter() ?? this.soonestToCoolOff();
    for (;;) {
      tried.add(current);
      const last = nextAfter() === undefined;
      let passedText = false;
      const onDelta = options.onDelta;
      const callOptions: CallOptions = {
        ...options,
        maxRetries: last ? options.maxRetries : 0,
        ...(onDelta ? { onDelta: (text: string) => { if (text) passedText = true; onDelta(text); } } : {}),
      };
      if (callOptions.maxRetries === undefined) delete callOptions.maxRetries;
      const started = clock.now();
      try {
        const response = await current.provider.complete({ ...request, model: current.model }, callOptions);
        cooldowns.succeed(current.providerId, current.keyIndex);
        response.providerId = current.providerId;
        response.model ||= current.model;
        response.failedAttempts = failed;
        response.retries += failed.reduce((sum, a) => sum + a.retries, 0);
        return response;
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        failed.push({
          providerId: current.providerId, model: current.model, keyIndex: current.keyIndex,
          code: typeof code === 'string' ? code : 'PROVIDER_FAILED',
          message: (error as Error | null)?.message ?? String(error),
          durationMs: clock.now() - started,
          retries: Number((error as { retries?: unknown } | null)?.retries) || 0,
        });
        // Once the caller aborted, a failure says nothing about the key. A stream that passed text on failed all the
        // same (its key is cooled) but is not failed over: the user saw that text.
        if (!isFailoverError(error) || options.signal?.aborted) throw withAttempts(error, failed);
        cooldowns.fail(current.providerId, current.keyIndex, error.code);
        cooledHere.set(current.credential, { model: current.model, code: error.code });
        if (passedText) throw withAttempts(error, failed);
        const next = nextAfter();
        this.tell({ from: candidateOf(current), ...(next ? { to: candidateOf(next) } : {}), code: error.code, message: error.message, at: clock.now() });
        if (!next) throw withAttempts(error, failed);
        current = next;
      }
    }
  }

  /** Every key cooling down: the one whose cooldown ends first (the first in chain order among equals). */
  private soonestToCoolOff(): Candidate {
    const { cooldowns } = this.options;
    let best = this.candidates[0]!;
    let bestUntil = Infinity;
    for (const c of this.candidates) {
      const until = cooldowns.coolingUntil(c.providerId, c.keyIndex) ?? -Infinity;
      if (until < bestUntil) {
        best = c;
        bestUntil = until;
      }
    }
    return best;
  }

  private tell(event: FailoverEvent): void {
    try {
      this.options.onFailover?.(event);
    } catch {
      // An observer must not break the chain.
    }
  }
}

function candidateOf(c: Candidate): FailoverCandidate {
  return { providerId: c.providerId, model: c.model, keyIndex: c.keyIndex };
}

function withAttempts(error: unknown, failed: FailedAttempt[]): unknown {
  if (error !== null && typeof error === 'object') (error as { failedAttempts?: FailedAttempt[] }).failedAttempts = failed;
  return error;
}
