import type { RunCheckpoint, SessionEntry } from '../sessions/entry.ts';
import type { InboundMessage, InternalKind } from '../core/message.ts';
import { formatCount, plural } from '../core/plural.ts';

/** Internal kinds that are batches of a background goal run. */
export function isBackgroundKind(kind: InternalKind | undefined): kind is 'background_auto_continue' | 'background_auto_resume' {
  return kind === 'background_auto_continue' || kind === 'background_auto_resume';
}

/** The delivery a user entry came from, so a replayed message is recognised in the transcript. */
export function sourceIdOf(message: InboundMessage): string {
  return `${message.channel}:${message.accountId}:${message.deliveryId ?? message.id}`;
}

/** The result a tool call gets when a stop or crash cut it short. */
export function interruptedResult(tool: string): string {
  return `Error: interrupted: the call to ${tool} was cut short (the gateway stopped or restarted) and was not run again. Check whether it took effect before calling it again.`;
}

/** Whether a turn's signal was aborted by the gateway shutting down (rather than by `/stop`). */
export function isShutdown(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof Error && signal.reason.message === 'shutdown';
}

/** The result a tool call gets when the user stopped the turn (`/stop`) while it ran. */
export function stoppedResult(tool: string): string {
  return `Error: stopped: the user stopped this turn (/stop) while ${tool} was running. Check whether it took effect before calling it again.`;
}

/** The prompt of a background batch (SPEC §11). */
export function goalPrompt(kind: 'background_auto_continue' | 'background_auto_resume'): string {
  const why = kind === 'background_auto_resume' ? 'The gateway restarted while you were working.' : 'The previous batch of steps reached its limit.';
  return `[${kind}] ${why} Continue working toward the standing goal. When it is reached, answer with the result.`;
}

/** What the user is told when a batch reaches `maxIterationsPerBatch`. */
export function batchLimitText(
  kind: 'stopped' | 'background' | 'budget-limited',
  f: { max: number; batch: number; maxBatches: number; goal?: string },
): string {
  switch (kind) {
    case 'stopped':
      return `I stopped after ${plural(f.max, 'tool step')} without a final answer. Say "continue" to let me go on.`;
    case 'background':
      return `This needs more than ${plural(f.max, 'step')}. I'm continuing in the background toward the goal (${f.goal}) and will post the result here. /stop pauses it, /goal off ends it.`;
    case 'budget-limited':
      return `I stopped working on the goal after ${plural(f.batch, 'batch', 'batches')} of ${plural(f.max, 'step')} (the limit is ${plural(f.maxBatches, 'batch', 'batches')} per goal). Say "continue" to go on, or /goal off to drop it.`;
  }
}

/** `/stop` on a goal run: a run that is running or waiting for its next batch is paused. True when it changed. */
export function pauseGoalRun(entry: SessionEntry): boolean {
  if (!entry.goal || (entry.runState !== 'running' && entry.runState !== 'continuing')) return false;
  entry.runState = 'paused';
  return true;
}

/** Which of a goal's own budgets (SPEC §14) is reached, and what the user is told; undefined while none is. */
export function runBudgetReached(
  checkpoint: RunCheckpoint,
  limits: { tokenBudget: number; maxWallClockMinutes: number; maxToolCalls: number },
  now: number,
): { which: 'tokens' | 'wall-clock' | 'tool calls'; text: string } | undefined {
  const n = (v: number) => formatCount(Math.round(v));
  const tail = 'Say "continue" to go on with a fresh budget, or /goal off to drop the goal.';
  if (limits.maxToolCalls > 0 && (checkpoint.toolCalls ?? 0) >= limits.maxToolCalls) {
    return { which: 'tool calls', text: `I stopped working on the goal: it reached its tool-call budget (${n(checkpoint.toolCalls ?? 0)} of ${n(limits.maxToolCalls)} calls, backgroundExecution.maxToolCalls). ${tail}` };
  }
  if (limits.tokenBudget > 0 && (checkpoint.tokens ?? 0) >= limits.tokenBudget) {
    return { which: 'tokens', text: `I stopped working on the goal: it reached its token budget (${n(checkpoint.tokens ?? 0)} of ${n(limits.tokenBudget)} tokens, backgroundExecution.tokenBudget). ${tail}` };
  }
  const minutes = (now - (checkpoint.startedAt ?? now)) / 60_000;
  if (limits.maxWallClockMinutes > 0 && minutes >= limits.maxWallClockMinutes) {
    return { which: 'wall-clock', text: `I stopped working on the goal: it reached its time budget (${n(minutes)} of ${n(limits.maxWallClockMinutes)} minutes, backgroundExecution.maxWallClockMinutes). ${tail}` };
  }
  return undefined;
}
