import type { GroupContextItem } from '../agent/turn-input.ts';

/**
 * Group messages that did not trigger a run, kept per session key (at most `limit` each, newest kept)
 * and handed to the next run as context. Memory only, bounded in keys too.
 */
export class GroupContextBuffer {
  private readonly items = new Map<string, GroupContextItem[]>();
  private readonly limit: number;
  private readonly maxKeys: number;

  constructor(options: { limit: number; maxKeys?: number }) {
    this.limit = options.limit;
    this.maxKeys = options.maxKeys ?? 10_000;
  }

  add(key: string, item: GroupContextItem): void {
    if (this.limit === 0) return;
    const list = this.items.get(key) ?? [];
    list.push(item);
    if (list.length > this.limit) list.splice(0, list.length - this.limit);
    this.items.delete(key);
    this.items.set(key, list);
    if (this.items.size > this.maxKeys) this.items.delete(this.items.keys().next().value as string);
  }

  /** Returns and clears what was kept for a key. */
  take(key: string): GroupContextItem[] | undefined {
    const list = this.items.get(key);
    this.items.delete(key);
    return list;
  }

  size(key: string): number {
    return this.items.get(key)?.length ?? 0;
  }
}
