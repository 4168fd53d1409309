import type { TranscriptEntry, TranscriptMessage } from '../../sessions/transcript.ts';
import { activeHistory, messageTokensOf, toChatMessage } from './context.ts';
import { chatMessageTokens } from '../../tokens/tokens.ts';

/** `agents.defaults.contextPruning` (ttl in milliseconds). */
export interface PruningSettings {
  mode: 'cache-ttl' | 'off';
  ttl: number;
  keepLastAssistants: number;
}

/** How a long old tool result is trimmed: results over `minChars` keep their first and last characters. */
export const SOFT_TRIM = { minChars: 4000, headChars: 1500, tailChars: 1500 } as const;

/** What pruning does to one tool result. */
export type PruneAction = 'trim' | 'clear';

/** The decisions of the last pruning pass of a session: tool-result id → action. */
export type PrunePlan = Map<string, PruneAction>;

/** What a pruned request saved. */
export interface PruneStats {
  trimmed: number;
  cleared: number;
}

/** Pruning is due once `ttl` has passed since the session's last request: the provider's prompt cache is cold by then. */
export function pruningDue(settings: PruningSettings, lastRequestAt: number | undefined, now: number): boolean {
  return settings.mode === 'cache-ttl' && lastRequestAt !== undefined && now - lastRequestAt >= settings.ttl;
}

/**
 * Index of the first protected message: tool results before the last `keepLastAssistants` assistant
 * messages may be pruned; with fewer assistant messages than that, none may.
 */
export function protectedFrom(kept: readonly TranscriptMessage[], keepLastAssistants: number): number {
  if (keepLastAssistants <= 0) return kept.length;
  let seen = 0;
  for (let i = kept.length - 1; i >= 0; i--) {
    if ((kept[i] as TranscriptMessage).role === 'assistant' && ++seen === keepLastAssistants) return i;
  }
  return 0;
}

/** A tool result cut to its head and tail with a note. */
export function trimToolResult(content: string): string {
  if (content.length <= SOFT_TRIM.minChars) return content;
  const head = content.slice(0, SOFT_TRIM.headChars);
  const tail = content.slice(content.length - SOFT_TRIM.tailChars);
  const omitted = content.length - head.length - tail.length;
  return `${head}\n\n[… tool result trimmed to save context: ${omitted} of ${content.length} characters omitted; the full result stays in the transcript …]\n\n${tail}`;
}

/** The placeholder of a cleared tool result. */
export function clearedToolResult(content: string): string {
  return `[Old tool result cleared to save context (${content.length} characters); the full result stays in the transcript.]`;
}

/**
 * Decides which old tool results to trim, and, when the request would still be over `budgetTokens`, which to
 * clear (oldest first). `fixedTokens` is the rest of the request (system, bootstrap, tools, summary, runtime
 * line) and `factor` the model's calibration factor.
 */
export function planPruning(
  kept: readonly TranscriptMessage[], settings: PruningSettings,
  budget: { budgetTokens: number; fixedTokens: number; factor: number; model: string },
): PrunePlan {
  const plan: PrunePlan = new Map();
  const end = protectedFrom(kept, settings.keepLastAssistants);
  let total = budget.fixedTokens;
  const eligible: { m: TranscriptMessage; tokens: number }[] = [];
  kept.forEach((m, i) => {
    let tokens = messageTokensOf(m, budget.model);
    if (i < end && m.role === 'tool') {
      if (m.content.length > SOFT_TRIM.minChars) {
        plan.set(m.id, 'trim');
        tokens = chatMessageTokens(toChatMessage({ ...m, content: trimToolResult(m.content) }), budget.model);
      }
      eligible.push({ m, tokens });
    }
    total += tokens;
  });
  for (const { m, tokens } of eligible) {
    if (total * budget.factor <= budget.budgetTokens) break;
    plan.set(m.id, 'clear');
    total += chatMessageTokens(toChatMessage({ ...m, content: clearedToolResult(m.content) }), budget.model) - tokens;
  }
  return plan;
}

/** A copy of the history with the plan applied; entries the plan does not name are the same objects. */
export function applyPruning(history: readonly TranscriptEntry[], plan: PrunePlan): { history: TranscriptEntry[]; stats: PruneStats } {
  const stats: PruneStats = { trimmed: 0, cleared: 0 };
  if (plan.size === 0) return { history: history.slice(), stats };
  const out = history.map((e): TranscriptEntry => {
    const action = e.type === 'message' && e.role === 'tool' ? plan.get(e.id) : undefined;
    if (!action || e.type !== 'message') return e;
    const content = action === 'clear' ? clearedToolResult(e.content) : trimToolResult(e.content);
    if (content === e.content) return e;
    if (action === 'clear') stats.cleared++;
    else stats.trimmed++;
    return { ...e, content };
  });
  return { history: out, stats };
}

/**
 * Request-only pruning of old tool results (SPEC §5). The decision is taken when the cache TTL has passed
 * and then kept for the session's next requests, so they extend the pruned request byte for byte (a fresh
 * decision only comes once the cache is cold again). The transcript is never changed. Plans are kept in
 * memory, per session id.
 */
export class Pruner {
  private readonly plans = new Map<string, PrunePlan>();
  private readonly limit: number;

  constructor(limit = 10_000) {
    this.limit = limit;
  }

  /** The history to build the request from. */
  prepare(
    sessionId: string, history: readonly TranscriptEntry[], settings: PruningSettings,
    timing: { now: number; lastRequestAt?: number },
    budget: { budgetTokens: number; fixedTokens: number; factor: number; model: string },
  ): { history: TranscriptEntry[]; stats: PruneStats; planned: boolean } {
    if (settings.mode === 'off') {
      this.plans.delete(sessionId);
      return { history: history.slice(), stats: { trimmed: 0, cleared: 0 }, planned: false };
    }
    let planned = false;
    if (pruningDue(settings, timing.lastRequestAt, timing.now)) {
      const plan = planPruning(activeHistory(history).kept, settings, budget);
      this.plans.delete(sessionId);
      this.plans.set(sessionId, plan);
      while (this.plans.size > this.limit) this.plans.delete(this.plans.keys().next().value as string);
      planned = true;
    }
    const plan = this.plans.get(sessionId);
    if (!plan) return { history: history.slice(), stats: { trimmed: 0, cleared: 0 }, planned };
    return { ...applyPruning(history, plan), planned };
  }

  forget(sessionId: string): void {
    this.plans.delete(sessionId);
  }
}
