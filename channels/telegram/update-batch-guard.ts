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

/**
 * A grammy API transformer that screens every `getUpdates` result ({@link screenUpdates}), so that one
 * malformed batch neither stops long polling nor makes it fetch the same batch forever. `report` hears
 * of every batch that lost something.
 */
export function updateBatchGuard(report: (dropped: DroppedUpdates) => void): Transformer {
  return (async (prev, method, payload, signal) => {
    const response = await prev(method, payload, signal);
    if (method !== 'getUpdates') return response;
    if (!response || typeof response !== 'object') {
      report({ count: 1, reasons: [`the response is ${describe(response)}`] });
      return { ok: true, result: [] };
    }
    if (!response.ok) return response;
    const offset = Number((payload as { offset?: unknown } | undefined)?.offset ?? 0);
    const { updates, dropped } = screenUpdates(response.result, Number.isFinite(offset) ? offset : 0);
    if (dropped.count > 0) report(dropped);
    return { ...response, result: updates };
  }) as Transformer;
}
