import type { ProviderResponse, ToolSchema } from '../../providers/types.ts';
import type { TranscriptEntry } from '../../sessions/transcript.ts';
import { countTokens } from '../../tokens/tokens.ts';
import { CompactionError, SUMMARY_RULES, SUMMARY_SECTIONS, SUMMARY_SYSTEM_PROMPT, summarizeHistory, type CompactionPlan, type SummaryStage } from './compaction.ts';
import { buildContext, type BuiltContext, type ContextInput } from './context.ts';
import { adHocContext, isContextOverflow, withInstruction } from './request-context.ts';

/** Heads the instruction of a summary request that shares the turn's prefix (how it is told apart in a request). */
export const SUMMARY_REQUEST_MARKER = '[Compaction request]';

/** Whether a compaction adds a block after the others, or rewrites the blocks and its part into one. */
export type SummaryMode = 'append' | 'merge';

/** What the instruction of a summary request says. */
export interface SummaryRequestText {
  mode: SummaryMode;
  /** Summary blocks in the system message. */
  blocks: number;
  /** Extra instructions from `/compact <instructions>`. */
  instructions?: string;
  /** The lines of the images the summarized messages show (they become these lines after the compaction). */
  imageLines?: readonly string[];
}

/**
 * The instruction that ends a summary request: what to summarize (the messages after the system message, and
 * in a merge the blocks too), the sections and rules of every summary, the images' lines and `/compact`'s
 * instructions. It comes after the conversation, so the request shares the turn requests' prefix.
 */
export function summaryRequestText(options: SummaryRequestText): string {
  const intro = options.mode === 'merge'
    ? 'Write one summary of the summary blocks at the end of the system message and of the conversation after them, up to this message: it will replace both in your context. Where they conflict the later part wins; an open task or pending ask that a later part shows as done is no longer open.'
    : options.blocks > 0
      ? 'Summarize the conversation after the summary blocks above: the messages from the first one after the system message up to this one. Your summary will be added to the system message as one more block after the others, and the messages it covers will be dropped from your context. Do not repeat what the earlier blocks say, but record what changed (a decision taken back, a task done).'
      : 'Summarize the conversation above: the messages from the first one after the system message up to this one. Your summary will be added to the system message, and the messages it covers will be dropped from your context.';
  const parts = [
    `${SUMMARY_REQUEST_MARKER} This message is from Switchboard, not from the user, and your answer is not shown to the user. ${intro} Write the summary for yourself, so that you can continue the conversation without those messages.`,
    SUMMARY_SECTIONS,
    SUMMARY_RULES,
  ];
  if (options.imageLines?.length) {
    parts.push(`The images in those messages will be dropped too, each replaced by its line: ${options.imageLines.join(' ')}. Under "Context", write what each showed that still matters, after its line.`);
  }
  if (options.instructions?.trim()) parts.push(`Additional instructions for this summary: ${options.instructions.trim()}`);
  parts.push('Do not call any tool: answer with the summary text.');
  return parts.join('\n\n');
}

/** The request the turns of the session would send now, and what it was built from. */
export interface TurnPrefix {
  /** The context input of the last turn request (its history already pruned as the request was). */
  input: ContextInput;
  tools: ToolSchema[];
  model: string;
  /** The model's calibration factor. */
  factor: number;
  /** Most calibrated tokens one request may have (the compaction threshold). */
  threshold: number;
}

/**
 * The summary request that shares the turn requests' prefix: the system message with the blocks in force, the
 * messages to summarize exactly as the turn requests carry them (runtime lines, pruning, images), and the
 * instruction. Built by the same assembly from the history without the kept tail, so the bytes are the same.
 */
export function summaryRequest(prefix: TurnPrefix, plan: CompactionPlan, text: Omit<SummaryRequestText, 'imageLines'>): BuiltContext {
  const keep = new Set(plan.keep.map((m) => m.id));
  const history = prefix.input.history.filter((e: TranscriptEntry) => e.type !== 'message' || !keep.has(e.id));
  const base = buildContext({ ...prefix.input, history });
  const imageLines = prefix.input.imageOf
    ? plan.summarize.flatMap((m) => (m.role === 'user' ? (m.media ?? []).filter((r) => r.as === 'image').map((r) => r.line) : []))
    : [];
  return withInstruction(base, summaryRequestText({ ...text, imageLines }), prefix.model);
}

/** What {@link makeCompactionSummary} made. */
export interface CompactionSummary {
  summary: string;
  /** True when the summary is a block after the others; false when it replaces them (a merge). */
  appended: boolean;
  /** Summary calls made. */
  calls: number;
  /** Parts the history was summarized in (1 = one call). */
  parts: number;
  /** True when the summary came from one request sharing the turns' prefix (else the staged path). */
  sharedPrefix: boolean;
}

/** Options of {@link makeCompactionSummary}. */
export interface CompactionSummaryOptions {
  prefix: TurnPrefix;
  plan: CompactionPlan;
  /** The summary blocks in force, oldest first. */
  blocks: readonly string[];
  mode: SummaryMode;
  instructions?: string;
  /** One accounted summary call. */
  call(context: BuiltContext, tools: ToolSchema[], stage: SummaryStage | { kind: 'prefix' }): Promise<ProviderResponse>;
}

/**
 * The summary of one compaction. When the messages to summarize fit one request, that request shares the turn
 * requests' prefix and carries the same tools (providers put them before or inside the cached prefix), so the
 * provider reads it from its cache; an answer that calls a tool gives its text, or fails the compaction. A
 * history too long for it (or refused by the provider as too long) is summarized in parts and merged, in
 * requests of their own; a merge then summarizes the blocks in force too.
 */
export async function makeCompactionSummary(options: CompactionSummaryOptions): Promise<CompactionSummary> {
  const { prefix, plan, blocks, mode, instructions } = options;
  const appended = mode === 'append' && blocks.length > 0;
  let calls = 0;
  const request = summaryRequest(prefix, plan, { mode, blocks: blocks.length, ...(instructions ? { instructions } : {}) });
  if (Math.round(request.tokens * prefix.factor) <= prefix.threshold) {
    try {
      calls++;
      const summary = summaryText(await options.call(request, prefix.tools, { kind: 'prefix' }));
      return { summary, appended, calls, parts: 1, sharedPrefix: true };
    } catch (error) {
      // The window is smaller than our count says: the staged path's smaller requests may still fit.
      if (!isContextOverflow(error)) throw error;
    }
  }
  const { model, factor, threshold } = prefix;
  const chunkTokens = Math.max(256, Math.floor((threshold * 0.8) / factor)
    - countTokens(SUMMARY_SYSTEM_PROMPT, model) - countTokens(instructions ?? '', model) - 64);
  const staged = await summarizeHistory({
    messages: plan.summarize, ...(mode === 'merge' && blocks.length ? { previousSummary: blocks.join('\n\n') } : {}),
    ...(instructions ? { instructions } : {}), model, chunkTokens,
    call: async (messages, stage) => summaryText(await options.call(adHocContext(messages, model, 'history'), [], stage)),
  });
  return { summary: staged.summary, appended, calls: calls + staged.calls, parts: staged.parts, sharedPrefix: false };
}

/** The summary an answer holds: its text; an answer with only tool calls, or nothing, fails the compaction. */
function summaryText(response: ProviderResponse): string {
  const text = response.content.trim();
  if (text) return text;
  if (response.toolCalls.length) throw new CompactionError(`The model called a tool (${response.toolCalls.map((c) => c.name).join(', ')}) instead of writing the summary.`);
  throw new CompactionError('The model returned an empty summary.');
}
