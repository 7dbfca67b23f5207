import type { RgbaImage } from '../formats/png.js';
import type { Random } from './random.js';

export type Rgb = readonly [number, number, number];

/** h in degrees, s and l in 0..1. */
export function hsl(h: number, s: number, l: number): Rgb {
  const hue = (((h % 360) + 360) % 360) / 360;
  const q = l < 0.5 ? l * (1 + s) : l + s - l * s;
  const p = 2 * l - q;
  const channel = (t: number): number => {
    let x = t;
    if (x < 0) x += 1;
    if (x > 1) x -= 1;
    let v: number;
    if (x < 1 / 6) v = p + (q - p) * 6 * x;
    else if (x < 1 / 2) v = q;
    else if (x < 2 / 3) v = p + (q - p) * (2 / 3 - x) * 6;
    else v = p;
    return Math.round(v * 255);
  };
  return [channel(hue + 1 / 3), channel(hue), channel(hue - 1 / 3)];
}

export function mix(a: Rgb, b: Rgb, t: number): Rgb {
  return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
}

/** Words in a prompt that steer the palette, so "a red fox" really comes out red. Hue in degrees. */
const HUE_WORDS: Record<string, number> = {
  red: 0, crimson: 350, fire: 12, lava: 8, orange: 28, autumn: 25, sunset: 18, desert: 38, gold: 45, golden: 45,
  yellow: 55, sun: 50, lemon: 58, lime: 90, green: 120, forest: 115, grass: 105, jungle: 130, mint: 150,
  teal: 175, cyan: 185, ice: 190, ocean: 200, sea: 200, water: 198, sky: 205, blue: 222, navy: 230, night: 235,
  indigo: 250, violet: 270, purple: 278, lavender: 265, magenta: 300, pink: 330, rose: 340,
};
const DARK_WORDS = new Set(['night', 'dark', 'midnight', 'shadow', 'space', 'storm', 'navy']);
const PALE_WORDS = new Set(['pale', 'pastel', 'soft', 'snow', 'winter', 'misty', 'fog', 'cloud']);

export interface Palette {
  /** Background from top to bottom. */
  sky: [Rgb, Rgb];
  /** Colours for shapes, from the most to the least saturated. */
  colors: Rgb[];
  baseHue: number;
}

/** A palette from the prompt: colour words set the base hue and mood, the seed picks the harmony. */
export function paletteFor(prompt: string, random: Random): Palette {
  const words = prompt.toLowerCase().match(/[a-z]+/g) ?? [];
  const hues = words.filter((w) => w in HUE_WORDS).map((w) => HUE_WORDS[w]);
  const baseHue = hues.length > 0 ? hues[0] + random.range(-8, 8) : random.range(0, 360);
  const dark = words.some((w) => DARK_WORDS.has(w));
  const pale = words.some((w) => PALE_WORDS.has(w));
  const offsets = random.pick([
    [0, 30, -30, 180, 15], // analogous with an accent
    [0, 120, 240, 60, 180], // triadic
    [0, 180, 20, 200, -20], // complementary
    [0, 150, 210, 30, -30], // split complementary
  ]);
  // A second colour word in the prompt takes the second slot of the harmony.
  const second = hues.length > 1 ? hues[1] - baseHue : undefined;
  const saturation = pale ? 0.45 : 0.75;
  const lightness = dark ? 0.35 : pale ? 0.75 : 0.55;
  const colors = offsets.map((offset, i) =>
    hsl(baseHue + (i === 1 && second !== undefined ? second : offset), saturation + random.range(-0.1, 0.15), lightness + random.range(-0.12, 0.12)),
  );
  const sky: [Rgb, Rgb] = dark
    ? [hsl(baseHue + 20, 0.5, 0.08), hsl(baseHue, 0.55, 0.25)]
    : [hsl(baseHue + 25, pale ? 0.35 : 0.55, pale ? 0.9 : 0.82), hsl(baseHue - 10, pale ? 0.4 : 0.6, pale ? 0.78 : 0.62)];
  return { sky, colors, baseHue };
}

/** A small RGBA raster with alpha blending; enough for flat shapes and gradients with soft edges. */
export class Canvas implements RgbaImage {
  readonly data: Uint8Array;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.data = new Uint8Array(width * height * 4);
  }

  blend(x: number, y: number, color: Rgb, alpha: number): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height || alpha <= 0) return;
    const i = (y * this.width + x) * 4;
    const a = alpha >= 1 ? 1 : alpha;
    const d = this.data;
    d[i] = Math.round(d[i] + (color[0] - d[i]) * a);
    d[i + 1] = Math.round(d[i + 1] + (color[1] - d[i + 1]) * a);
    d[i + 2] = Math.round(d[i + 2] + (color[2] - d[i + 2]) * a);
    d[i + 3] = 255;
  }

  verticalGradient(top: Rgb, bottom: Rgb, from = 0, to: number = this.height): void {
    for (let y = Math.max(0, Math.floor(from)); y < Math.min(this.height, Math.ceil(to)); y++) {
      const color = mix(top, bottom, to - from <= 1 ? 0 : (y - from) / (to - from - 1));
      for (let x = 0; x < this.width; x++) this.blend(x, y, color, 1);
    }
  }

  /** A disc with a one-pixel soft edge; `alpha` below 1 makes it translucent. */
  circle(cx: number, cy: number, radius: number, color: Rgb, alpha = 1): void {
    const x0 = Math.max(0, Math.floor(cx - radius - 1));
    const x1 = Math.min(this.width - 1, Math.ceil(cx + radius + 1));
    const y0 = Math.max(0, Math.floor(cy - radius - 1));
    const y1 = Math.min(this.height - 1, Math.ceil(cy + radius + 1));
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const distance = Math.sqrt((x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2);
        const coverage = Math.min(1, Math.max(0, radius - distance + 0.5));
        if (coverage > 0) this.blend(x, y, color, coverage * alpha);
      }
    }
  }

  /** A ring of the given thickness, soft on both edges. */
  ring(cx: number, cy: number, radius: number, thickness: number, color: Rgb, alpha = 1): void {
    const outer = radius + thickness / 2;
    const inner = radius - thickness / 2;
    const x0 = Math.max(0, Math.floor(cx - outer - 1));
    const x1 = Math.min(this.width - 1, Math.ceil(cx + outer + 1));
    const y0 = Math.max(0, Math.floor(cy - outer - 1));
    const y1 = Math.min(this.height - 1, Math.ceil(cy + outer + 1));
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const distance = Math.sqrt((x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2);
        const coverage = Math.min(1, Math.max(0, outer - distance + 0.5), Math.max(0, distance - inner + 0.5));
        if (coverage > 0) this.blend(x, y, color, coverage * alpha);
      }
    }
  }

  rect(x: number, y: number, w: number, h: number, color: Rgb, alpha = 1): void {
    for (let yy = Math.max(0, Math.floor(y)); yy < Math.min(this.height, Math.ceil(y + h)); yy++) {
      for (let xx = Math.max(0, Math.floor(x)); xx < Math.min(this.width, Math.ceil(x + w)); xx++) {
        this.blend(xx, yy, color, alpha);
      }
    }
  }

  /** Fills every column from `ridge(x)` down to the bottom: mountains, hills, waves. */
  ridge(ridge: (x: number) => number, color: Rgb, alpha = 1): void {
    for (let x = 0; x < this.width; x++) {
      const top = ridge(x);
      const start = Math.max(0, Math.floor(top));
      for (let y = start; y < this.height; y++) {
        // Soften the top pixel so ridges are not stair-stepped.
        const coverage = y === start ? 1 - (top - start) : 1;
        this.blend(x, y, color, coverage * alpha);
      }
    }
  }
}

/** Smooth 1-D value noise from seeded control points, periodic over `period` so it can scroll without a seam. */
export function valueNoise(random: Random, period: number): (x: number) => number {
  const points = Array.from({ length: period }, () => random.next());
  return (x: number): number => {
    const i = Math.floor(x);
    const t = x - i;
    const a = points[((i % period) + period) % period];
    const b = points[(((i + 1) % period) + period) % period];
    const s = t * t * (3 - 2 * t);
    return a + (b - a) * s;
  };
}
