/** The rule a provider counts an image's input tokens by (SPEC §15: `/context`'s `images` line, the ledger, budgets). */
export type ImageTokenRule = 'openai-tiles' | 'anthropic';

/** OpenAI: every 512-px tile of the scaled image costs this much… */
export const OPENAI_TILE_TOKENS = 170;
/** …plus this much per image. */
export const OPENAI_BASE_TOKENS = 85;
/** Anthropic: images whose long edge is longer are scaled down to it first. */
export const ANTHROPIC_MAX_SIDE = 1568;
/** Anthropic: images estimated above this many tokens (~1.15 megapixels) are scaled down to it first. */
export const ANTHROPIC_MAX_TOKENS = 1600;

/**
 * Estimated input tokens of one image of `width`×`height` pixels (as sent, after our own downscaling).
 *
 * - `openai-tiles` (default; the OpenAI-compatible request shape the gateway sends): the high-detail rule of
 *   OpenAI's vision guide (https://platform.openai.com/docs/guides/images-vision, "Calculating costs", GPT-4o /
 *   GPT-4.1 / GPT-4.5 / o-series): the image is scaled to fit in 2048×2048, then so that its shortest side is
 *   768 px (both only ever down), and costs 170 tokens per 512×512 tile covering it plus 85.
 *   Published examples: 1024×1024 → 768×768, 4 tiles → 765; 2048×4096 → 768×1536, 6 tiles → 1105.
 * - `anthropic`: Anthropic's vision guide (https://docs.anthropic.com/en/docs/build-with-claude/vision,
 *   "Calculate image costs"): tokens = width × height / 750, after the image is scaled (down only, keeping its
 *   aspect ratio) so that its long edge is at most 1568 px and it costs at most about 1600 tokens.
 *   Published examples: 200×200 → ~54; 1000×1000 → ~1334; 1092×1092 → ~1590.
 *
 * A degenerate size (0, negative, not finite) costs 0.
 */
export function imageTokens(width: number, height: number, rule: ImageTokenRule = 'openai-tiles'): number {
  if (!(width > 0 && height > 0 && Number.isFinite(width) && Number.isFinite(height))) return 0;
  return rule === 'anthropic' ? anthropicTokens(width, height) : openAiTiles(width, height);
}

function openAiTiles(width: number, height: number): number {
  let w = width;
  let h = height;
  const fit = Math.min(1, 2048 / Math.max(w, h));
  w *= fit;
  h *= fit;
  const shortest = Math.min(1, 768 / Math.min(w, h));
  w = Math.floor(w * shortest);
  h = Math.floor(h * shortest);
  const tiles = Math.ceil(w / 512) * Math.ceil(h / 512);
  return OPENAI_TILE_TOKENS * Math.max(1, tiles) + OPENAI_BASE_TOKENS;
}

function anthropicTokens(width: number, height: number): number {
  let w = width;
  let h = height;
  const fit = Math.min(1, ANTHROPIC_MAX_SIDE / Math.max(w, h));
  w *= fit;
  h *= fit;
  const tokens = (w * h) / 750;
  if (tokens > ANTHROPIC_MAX_TOKENS) return ANTHROPIC_MAX_TOKENS;
  return Math.max(1, Math.ceil(tokens));
}
