/** Bounds of a calibration factor: our tokenizer is never trusted to be off by more than this. */
export const CALIBRATION_MIN = 0.5;
export const CALIBRATION_MAX = 2;
/**
 * A sample whose reported/counted ratio is outside this range is not a tokenizer difference but a provider
 * (or proxy) that reports something else; it is ignored rather than allowed to skew budget decisions.
 */
export const PLAUSIBLE_RATIO: readonly [number, number] = [0.25, 4];
/** Weight of the newest sample in the moving average. */
const ALPHA = 0.3;

/** One model's correction. */
export interface CalibrationState {
  factor: number;
  samples: number;
}

/**
 * A per-model correction factor between our token count of a request and the `prompt_tokens` the provider
 * reports for it (an exponential moving average, clamped to [0.5, 2]). Budget decisions (compaction
 * threshold, pruning budget, chunk sizes) multiply our count by it. Kept in memory: it re-learns from the
 * first calls after a restart.
 */
export class TokenCalibration {
  private readonly states = new Map<string, CalibrationState>();

  /** Records one call. Returns false when the sample was ignored as implausible. */
  observe(modelKey: string, reportedPromptTokens: number, countedTokens: number): boolean {
    if (!(reportedPromptTokens > 0) || !(countedTokens > 0)) return false;
    const ratio = reportedPromptTokens / countedTokens;
    if (ratio < (PLAUSIBLE_RATIO[0]) || ratio > PLAUSIBLE_RATIO[1]) return false;
    const current = this.states.get(modelKey);
    const next = current ? current.factor + ALPHA * (ratio - current.factor) : ratio;
    this.states.set(modelKey, { factor: clamp(next), samples: (current?.samples ?? 0) + 1 });
    return true;
  }

  /** The factor of a model (1 until it has a sample). */
  factor(modelKey: string): number {
    return this.states.get(modelKey)?.factor ?? 1;
  }

  /** Our count, corrected for the model. */
  apply(modelKey: string, countedTokens: number): number {
    return Math.round(countedTokens * this.factor(modelKey));
  }

  state(modelKey: string): CalibrationState | undefined {
    return this.states.get(modelKey);
  }
}

/** Whether a reported prompt size is comparable with our count (see {@link PLAUSIBLE_RATIO}). */
export function isPlausible(reportedPromptTokens: number, countedTokens: number): boolean {
  if (!(reportedPromptTokens > 0) || !(countedTokens > 0)) return false;
  const ratio = reportedPromptTokens / countedTokens;
  return ratio >= PLAUSIBLE_RATIO[0] && ratio <= PLAUSIBLE_RATIO[1];
}

/** The calibration key of a provider's model. */
export function calibrationKey(providerId: string, model: string): string {
  return `${providerId}/${model}`;
}

function clamp(value: number): number {
  return Math.min(CALIBRATION_MAX, Math.max(CALIBRATION_MIN, value));
}

/** Sessions whose last reported prompt is kept (the least recently called are forgotten: estimated again). */
const MAX_PREDICTED_SESSIONS = 10_000;

/** A session's last call with a reported prompt size: what the provider counted, and what we counted. */
interface ReportedPrompt {
  sessionId: string;
  compactionCount: number;
  reported: number;
  counted: number;
}

/**
 * The session budget's prediction of a prompt (SPEC §14): the prompt size the provider last reported for this
 * session plus what our count says was added since, so a provider that counts very differently from us (which
 * calibration ignores as implausible) is still predicted by what it charges. Only when the session has no
 * reported call yet, or a reset or compaction changed the prefix since, is the calibrated estimate used.
 * In memory (one record per session key, for the 10,000 most recently called): after a restart the first call of a
 * session is estimated again.
 */
export class PromptPrediction {
  private readonly last = new Map<string, ReportedPrompt>();

  /** Records a call of the session whose request we counted as `counted` and the provider as `reported`. */
  record(entry: { key: string; sessionId: string; compactionCount: number }, reported: number, counted: number): void {
    if (!(reported > 0) || !(counted > 0)) return;
    // Newest last; the oldest goes first once full (one-off API calls each have a key of their own).
    this.last.delete(entry.key);
    this.last.set(entry.key, { sessionId: entry.sessionId, compactionCount: entry.compactionCount, reported, counted });
    if (this.last.size > MAX_PREDICTED_SESSIONS) this.last.delete(this.last.keys().next().value!);
  }

  /** The predicted prompt of the session's next call, whose request we count as `counted`; `calibrated` when there is no usable record. */
  predict(entry: { key: string; sessionId: string; compactionCount: number }, counted: number, calibrated: number): number {
    const last = this.last.get(entry.key);
    if (!last || last.sessionId !== entry.sessionId || last.compactionCount !== entry.compactionCount) return calibrated;
    return Math.max(0, last.reported + counted - last.counted);
  }
}
