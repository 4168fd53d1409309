import type { Transformer } from 'grammy';

/** What one screened `getUpdates` batch lost. */
export interface DroppedUpdates {
  /** Entries dropped or replaced by a bare placeholder. */
  count: number;
  /** Why, for the log (the first few reasons). */
  reasons: string[];
}

const isUpdateId = (id: unknown): id is number => typeof id === 'number' && Number.isSafeInteger(id) && id >= 0;

/** An update id that can still be read from a malformed one (`5.5`, `"7"`), to move the offset past it. */
function salvagedId(id: unknown): number | undefined {
  const n = typeof id === 'number' ? Math.floor(id) : typeof id === 'string' && /^\d{1,15}$/.test(id) ? Number(id) : NaN;
  return isUpdateId(n) ? n : undefined;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value;
}

/**
 * The updates of one `getUpdates` result that grammy can handle: objects with an integer `update_id` at
 * or past `offset`, in ascending order, each id once. grammy's polling loop throws on anything else (a
 * null entry, a result that is not a list) and stops, or computes a NaN offset from a missing id and
 * fetches the same batch again and again. An entry whose id can still be read is replaced by a bare
 * `{ update_id }` (ignored as an unsupported update) so that the offset moves past it.
 */
export function screenUpdates(result: unknown, offset: number): { updates: { update_id: number }[]; dropped: DroppedUpdates } {
  const dropped: DroppedUpdates = { count: 0, reasons: [] };
  const drop = (reason: string) => {
    dropped.count++;
    if (dropped.reasons.length < 5) dropped.reasons.push(reason);
  };
  if (!Array.isArray(result)) {
    drop(`the result is ${describe(result)}, not a list`);
    return { updates: [], dropped };
  }
  const byId = new Map<number, { update_id: number }>();
  for (const entry of result as unknown[]) {
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      drop(`an entry is ${describe(entry)}, not an update`);
      continue;
    }
    const id = (entry as { update_id?: unknown }).update_id;
    let update = entry as { update_id: number };
    if (!isUpdateId(id)) {
      const salvaged = salvagedId(id);
      drop(`an update_id is ${describe(id)} ${String(id).slice(0, 20)}`);
      if (salvaged === undefined) continue;
      update = { update_id: salvaged };
    }
    if (update.update_id < offset || byId.has(update.update_id)) continue;
    byId.set(update.update_id, update);
  }
  return { updates: [...byId.values()].sort((a, b) => a.update_id - b.update_id), dropped };
}

/** Options of {@link updateBatchGuard}. */
export interface UpdateBatchGuardOptions {
  /** First wait after a batch with nothing readable in it; doubles while they keep coming (default 1 s). */
  baseMs?: number;
  /** The longest such wait (default 30 s). */
  maxMs?: number;
  /** Waits (tests pass their own). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

function sleepFor(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() { clearTimeout(timer); signal?.removeEventListener('abort', done); resolve(); }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A grammy API transformer that screens every `getUpdates` result ({@link screenUpdates}), so that one
 * malformed batch neither stops long polling nor makes it fetch the same batch forever. `report` hears
 * of every batch that lost something, with how many such batches came in a row. A batch with nothing
 * readable in it is answered only after a wait that doubles while they keep coming, so a Bot API (or a
 * proxy) that keeps answering garbage is not polled at network speed.
 */
export function updateBatchGuard(report: (dropped: DroppedUpdates, streak: number) => void, options: UpdateBatchGuardOptions = {}): Transformer {
  const { baseMs = 1000, maxMs = 30_000, sleep = sleepFor } = options;
  let streak = 0;
  const unreadable = async (signal?: AbortSignal) => {
    const wait = Math.min(maxMs, baseMs * 2 ** Math.min(streak - 1, 20));
    if (wait > 0 && !signal?.aborted) await sleep(wait, signal);
  };
  return (async (prev, method, payload, grammySignal) => {
    const response = await prev(method, payload, grammySignal);
    if (method !== 'getUpdates') return response;
    // grammy types its signal with an older polyfill's interface; at run time it is Node's own.
    const signal = grammySignal as AbortSignal | undefined;
    if (!response || typeof response !== 'object') {
      report({ count: 1, reasons: [`the response is ${describe(response)}`] }, ++streak);
      await unreadable(signal);
      return { ok: true, result: [] };
    }
    if (!response.ok) return response;
    const offset = Number((payload as { offset?: unknown } | undefined)?.offset ?? 0);
    const { updates, dropped } = screenUpdates(response.result, Number.isFinite(offset) ? offset : 0);
    if (dropped.count === 0 || updates.length > 0) {
      if (dropped.count > 0) report(dropped, 1);
      streak = 0;
      return { ...response, result: updates };
    }
    // Nothing readable and the offset cannot move: the same answer would come straight back.
    report(dropped, ++streak);
    await unreadable(signal);
    return { ...response, result: updates };
  }) as Transformer;
}

/** A `getUpdates` answered `{ ok: false }` with a 5xx or 429: Telegram is there but not serving. */
export class PollingAnswerFailure extends Error {
  constructor(readonly errorCode: number, readonly description: string) {
    super(`Telegram answered ${errorCode} (${description}) to getUpdates`);
    this.name = 'PollingAnswerFailure';
  }
}

/** What {@link pollingWatch} tells the adapter about its `getUpdates` calls. */
export interface PollingEvents {
  /** A call failed (a thrown network error, or `{ ok: false }` with a 5xx or 429); `failures` counts them in a row. */
  failed(error: unknown, failures: number): void;
  /** A call succeeded after `failures` failed ones in a row. */
  recovered(failures: number): void;
  /** Telegram answered 401 or 404 (the token was revoked or is unknown): retrying cannot fix it. */
  rejected(errorCode: number, description: string): void;
}

/**
 * A grammy API transformer that watches every `getUpdates` attempt, so that an outage is seen at once:
 * grammy's polling loop retries a failed call every few seconds on its own and says so only at debug
 * level. Install it before the retrying transformers (innermost), so that it sees each attempt. A call
 * cancelled by stopping the bot is not a failure.
 */
export function pollingWatch(events: PollingEvents): Transformer {
  let failures = 0;
  const failed = (error: unknown) => {
    failures++;
    events.failed(error, failures);
  };
  return (async (prev, method, payload, signal) => {
    if (method !== 'getUpdates') return prev(method, payload, signal);
    let response: unknown;
    try {
      response = await prev(method, payload, signal);
    } catch (error) {
      if (!signal?.aborted) failed(error);
      throw error;
    }
    const answer = response as { ok?: unknown; error_code?: unknown; description?: unknown } | null | undefined;
    if (answer && typeof answer === 'object' && answer.ok === false) {
      const code = Number(answer.error_code);
      const description = typeof answer.description === 'string' ? answer.description : '';
      if (code === 401 || code === 404) events.rejected(code, description);
      else if (code >= 500 || code === 429) failed(new PollingAnswerFailure(code, description));
      return response;
    }
    if (failures > 0) {
      const was = failures;
      failures = 0;
      events.recovered(was);
    }
    return response;
  }) as Transformer;
}
