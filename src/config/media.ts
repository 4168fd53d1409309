import { z } from 'zod';

/** `agents.defaults.vision` and an agent's own `vision` (SPEC §15): whether images reach the model as images. */
export const visionSetting = z.enum(['auto', 'on', 'off']);
export type VisionSetting = z.output<typeof visionSetting>;

/** `media` (SPEC §15): what is fetched, kept and given to the model. */
export const mediaSchema = z.strictObject({
  /** Largest file fetched, accepted from the web chat or sent with `send_file` (bytes; Telegram bots can download 20 MB). */
  maxBytes: z.number().int().min(1024).max(2_000_000_000).default(20 * 1024 * 1024),
  /** Deadline of one download (seconds). */
  downloadTimeoutSeconds: z.number().positive().max(3600).default(60),
  /** Stored media older than this is deleted (days). */
  retentionDays: z.number().nonnegative().default(30),
  /** The store's size limit (bytes); the oldest files go first. */
  maxStoreBytes: z.number().int().min(1024 * 1024).default(2 * 1024 * 1024 * 1024),
  /** Images are downscaled to at most this many pixels on their longer side before the model sees them. */
  imageMaxSide: z.number().int().min(64).max(16_384).default(2048),
  /** Longest document text inlined for the model (characters); longer text is cut with a note. */
  maxTextChars: z.number().int().min(100).default(50_000),
  /** Voice notes and audio files → text (`POST /v1/audio/transcriptions` of an OpenAI-compatible provider). */
  transcription: z.strictObject({
    enabled: z.boolean().default(true),
    model: z.string().min(1).default('whisper-1'),
    /** A provider id of `providers`; unset: the answering agent's provider. */
    provider: z.string().min(1).optional(),
  }).prefault({}),
});
export type MediaConfig = z.output<typeof mediaSchema>;

/** Model name patterns `vision: "auto"` treats as able to see images (SPEC §15). Case-insensitive globs. */
export const VISION_MODEL_PATTERNS: readonly string[] = [
  'gpt-4o*', 'gpt-4.1*', 'gpt-5*', 'o3*', 'o4*', 'claude*', 'gemini*', '*vl*', 'llava*', 'gpt-4-turbo*', '*vision*', 'pixtral*', 'qwen2.5-vl*',
];

/** Whether a model sees images under a vision setting. A provider prefix (`openai/gpt-4o`) is ignored. */
export function modelSeesImages(setting: VisionSetting, model: string): boolean {
  if (setting !== 'auto') return setting === 'on';
  // Asked at every request: the answer per model is kept.
  let sees = seeing.get(model);
  if (sees === undefined) {
    const name = model.toLowerCase().replace(/^.*\//, '');
    sees = VISION_PATTERNS.some((pattern) => pattern.test(name));
    if (seeing.size >= 256) seeing.clear();
    seeing.set(model, sees);
  }
  return sees;
}

const seeing = new Map<string, boolean>();

const VISION_PATTERNS: readonly RegExp[] = VISION_MODEL_PATTERNS.map(globToRegExp);

function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${glob.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
}
