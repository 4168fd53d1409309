import { describe, expect, it } from 'vitest';
import { imageTokens } from '../../src/tokens/image-tokens.ts';

describe('imageTokens (the providers\' published rules)', () => {
  it("follows OpenAI's high-detail tile rule (the published examples and hand-computed ones)", () => {
    // 1024×1024 → shortest side 768 → 768×768 → 2×2 tiles → 4×170 + 85.
    expect(imageTokens(1024, 1024)).toBe(765);
    // 2048×4096 → fits 1024×2048 → 768×1536 → 2×3 tiles → 6×170 + 85.
    expect(imageTokens(2048, 4096)).toBe(1105);
    // 4000×3000 → 2048×1536 → 1024×768 → 2×2 tiles.
    expect(imageTokens(4000, 3000, 'openai-tiles')).toBe(765);
    // Small images are never enlarged: 512×512 is one tile, 100×100 too.
    expect(imageTokens(512, 512)).toBe(255);
    expect(imageTokens(100, 100)).toBe(255);
    // 513×100: shortest side below 768 stays, 2×1 tiles.
    expect(imageTokens(513, 100)).toBe(425);
    // 1280×720: shortest side already below 768 → 3×2 tiles = 6 → 1105.
    expect(imageTokens(1280, 720)).toBe(1105);
  });

  it("follows Anthropic's rule: width × height / 750 after fitting the long side in 1568 px, at most ~1600", () => {
    expect(imageTokens(200, 200, 'anthropic')).toBe(54); // 53.3 → 54
    expect(imageTokens(1000, 1000, 'anthropic')).toBe(1334);
    expect(imageTokens(1092, 1092, 'anthropic')).toBe(1590);
    // 3136×784 → 1568×392 → 819.5 → 820.
    expect(imageTokens(3136, 784, 'anthropic')).toBe(820);
    expect(imageTokens(4000, 3000, 'anthropic')).toBe(1600);
  });

  it('costs nothing for a degenerate size', () => {
    expect(imageTokens(0, 100)).toBe(0);
    expect(imageTokens(Number.NaN, 100, 'anthropic')).toBe(0);
    expect(imageTokens(-5, 100)).toBe(0);
  });
});
