import { Canvas, hsl, mix, paletteFor, valueNoise, type Palette, type Rgb } from '../util/raster.js';
import type { Random } from '../util/random.js';

export const SCENE_STYLES = ['abstract', 'landscape', 'mosaic', 'pixel-art'] as const;
export type SceneStyle = (typeof SCENE_STYLES)[number];

/** Draws one frame; `t` runs from 0 (a still image) to 1 (the end of a clip). */
export type Scene = (canvas: Canvas, t: number) => void;

const TAU = Math.PI * 2;

/**
 * A scene decided entirely up front from the seeded generator, so the image model (t = 0) and every frame of the
 * video model are pure functions of the prompt and settings.
 */
export function createScene(style: SceneStyle, prompt: string, random: Random): Scene {
  const palette = paletteFor(prompt, random);
  switch (style) {
    case 'abstract':
      return abstractScene(palette, random);
    case 'landscape':
      return landscapeScene(palette, random, prompt);
    case 'mosaic':
      return mosaicScene(palette, random);
    case 'pixel-art':
      return pixelScene(palette, random);
  }
}

function abstractScene(palette: Palette, random: Random): Scene {
  const shapes = Array.from({ length: random.int(14, 26) }, () => ({
    kind: random.pick(['circle', 'circle', 'ring', 'rect'] as const),
    x: random.next(),
    y: random.next(),
    size: random.range(0.04, 0.22),
    color: random.pick(palette.colors),
    alpha: random.range(0.35, 0.85),
    orbit: random.range(0.02, 0.12),
    turns: random.pick([-1, 1]) * random.int(1, 2),
    phase: random.next(),
  }));
  // Big shapes first so the small ones stay visible on top.
  shapes.sort((a, b) => b.size - a.size);
  return (canvas, t) => {
    const { width: w, height: h } = canvas;
    const unit = Math.min(w, h);
    canvas.verticalGradient(palette.sky[0], palette.sky[1]);
    for (const s of shapes) {
      const angle = TAU * (s.phase + s.turns * t);
      const cx = (s.x + Math.cos(angle) * s.orbit) * w;
      const cy = (s.y + Math.sin(angle) * s.orbit) * h;
      const r = s.size * unit;
      if (s.kind === 'circle') canvas.circle(cx, cy, r, s.color, s.alpha);
      else if (s.kind === 'ring') canvas.ring(cx, cy, r, Math.max(2, r * 0.25), s.color, s.alpha);
      else canvas.rect(cx - r, cy - r * 0.6, r * 2, r * 1.2, s.color, s.alpha);
    }
  };
}

function landscapeScene(palette: Palette, random: Random, prompt: string): Scene {
  const night = /\b(night|dark|midnight|space|stars?)\b/i.test(prompt);
  const water = /\b(sea|ocean|lake|water|river|beach)\b/i.test(prompt) || random.chance(0.3);
  const sun = { x: random.range(0.15, 0.85), y: random.range(0.12, 0.35), r: random.range(0.05, 0.1) };
  const stars = night ? Array.from({ length: 60 }, () => ({ x: random.next(), y: random.next() * 0.6, b: random.next() })) : [];
  const layers = Array.from({ length: 4 }, (_, i) => ({
    noise: valueNoise(random, 64),
    frequency: random.range(4, 9) * (1 + i * 0.4),
    base: 0.42 + i * 0.12 + random.range(-0.03, 0.03),
    amplitude: random.range(0.08, 0.2) / (1 + i * 0.5),
    color: mix(random.pick(palette.colors), night ? [5, 5, 20] : [20, 30, 25], 0.35 + i * 0.15),
    speed: 0.05 * (i + 1),
  }));
  const sunColor: Rgb = night ? [235, 235, 220] : hsl(palette.baseHue + 40, 0.9, 0.7);
  return (canvas, t) => {
    const { width: w, height: h } = canvas;
    canvas.verticalGradient(palette.sky[0], palette.sky[1], 0, h * (water ? 0.7 : 1));
    for (const star of stars) {
      const twinkle = 0.5 + 0.5 * Math.sin(TAU * (star.b + t * 2));
      canvas.blend(Math.floor(star.x * w), Math.floor(star.y * h), [255, 255, 240], 0.4 + 0.6 * twinkle * star.b);
    }
    const sunY = (sun.y + 0.08 * (1 - t)) * h;
    canvas.circle(sun.x * w, sunY, sun.r * Math.min(w, h) * 2.2, sunColor, 0.15);
    canvas.circle(sun.x * w, sunY, sun.r * Math.min(w, h), sunColor, 1);
    const horizon = h * 0.7;
    for (const layer of layers) {
      const scroll = t * layer.speed * layer.frequency * 4;
      canvas.ridge((x) => {
        const top = (layer.base - layer.amplitude * layer.noise((x / w) * layer.frequency + scroll)) * h;
        return water ? Math.min(top, horizon) : top;
      }, layer.color);
    }
    if (water) {
      // Water: a band below the horizon that mirrors the sky, with moving streaks of sun.
      canvas.verticalGradient(mix(palette.sky[1], [10, 30, 60], 0.4), mix(palette.sky[0], [0, 10, 30], 0.6), horizon, h);
      for (let y = Math.ceil(horizon); y < h; y += 3) {
        const wobble = Math.sin(y * 0.7 + TAU * t * 2) * 0.03 * w;
        const width = sun.r * w * (1 - (y - horizon) / (h - horizon)) * 1.5;
        canvas.rect(sun.x * w - width / 2 + wobble, y, width, 1, sunColor, 0.6);
      }
    }
  };
}

function mosaicScene(palette: Palette, random: Random): Scene {
  const n = random.pick([4, 6, 8]);
  const tiles = Array.from({ length: n * n }, () => ({
    background: random.int(0, palette.colors.length - 1),
    foreground: random.int(0, palette.colors.length - 1),
    kind: random.pick(['quarter', 'circle', 'diamond', 'stripe'] as const),
    rotation: random.int(0, 3),
  }));
  return (canvas, t) => {
    const { width: w, height: h } = canvas;
    const tw = w / n;
    const th = h / n;
    const shift = Math.floor(t * palette.colors.length * 2);
    const colorAt = (i: number): Rgb => palette.colors[(i + shift) % palette.colors.length];
    for (let row = 0; row < n; row++) {
      for (let col = 0; col < n; col++) {
        // Mirror the left half onto the right half: symmetric layouts read as designed rather than random.
        const sourceCol = col < n / 2 ? col : n - 1 - col;
        const tile = tiles[row * n + sourceCol];
        const x0 = col * tw;
        const y0 = row * th;
        canvas.rect(x0, y0, tw, th, colorAt(tile.background));
        const fg = tile.background === tile.foreground ? colorAt(tile.foreground + 1) : colorAt(tile.foreground);
        const corner = (tile.rotation + (col < n / 2 ? 0 : 1)) % 4;
        const cx = x0 + (corner === 1 || corner === 2 ? tw : 0);
        const cy = y0 + (corner >= 2 ? th : 0);
        if (tile.kind === 'quarter') {
          clip(canvas, x0, y0, tw, th, () => canvas.circle(cx, cy, Math.min(tw, th), fg));
        } else if (tile.kind === 'circle') {
          canvas.circle(x0 + tw / 2, y0 + th / 2, Math.min(tw, th) * 0.35, fg);
        } else if (tile.kind === 'diamond') {
          for (let y = 0; y < th; y++) {
            const half = (tw / 2) * (1 - Math.abs((y + 0.5) / th - 0.5) * 2);
            canvas.rect(x0 + tw / 2 - half, y0 + y, half * 2, 1, fg);
          }
        } else {
          for (let k = 0; k < 3; k++) canvas.rect(x0, y0 + (th * (2 * k + 0.5)) / 6, tw, th / 6, fg, 0.9);
        }
      }
    }
  };
}

/** Draws `draw` but keeps only what lands inside the rectangle. */
function clip(canvas: Canvas, x: number, y: number, w: number, h: number, draw: () => void): void {
  const saved = canvas.data.slice();
  draw();
  const x0 = Math.floor(x);
  const y0 = Math.floor(y);
  const x1 = Math.ceil(x + w);
  const y1 = Math.ceil(y + h);
  for (let yy = 0; yy < canvas.height; yy++) {
    if (yy >= y0 && yy < y1) {
      const left = yy * canvas.width * 4;
      canvas.data.set(saved.subarray(left, left + x0 * 4), left);
      const right = (yy * canvas.width + x1) * 4;
      if (x1 < canvas.width) canvas.data.set(saved.subarray(right, (yy + 1) * canvas.width * 4), right);
    } else {
      const start = yy * canvas.width * 4;
      canvas.data.set(saved.subarray(start, start + canvas.width * 4), start);
    }
  }
}

function pixelScene(palette: Palette, random: Random): Scene {
  const size = 10;
  const sprite: number[][] = [];
  for (let y = 0; y < size; y++) {
    const row: number[] = [];
    for (let x = 0; x < size / 2; x++) {
      // Denser towards the middle, so the sprite reads as a creature rather than noise.
      const density = 0.65 - Math.abs(x - size / 2 + 0.5) * 0.05 - Math.abs(y - size / 2 + 0.5) * 0.07;
      row.push(random.chance(density) ? random.int(1, 3) : 0);
    }
    sprite.push([...row, ...row.slice().reverse()]);
  }
  const eyes = random.int(2, 4);
  sprite[eyes][3] = 4;
  sprite[eyes][size - 4] = 4;
  const colors: Rgb[] = [[0, 0, 0], palette.colors[0], palette.colors[1], mix(palette.colors[0], [0, 0, 0], 0.45), [250, 250, 250]];
  return (canvas, t) => {
    const { width: w, height: h } = canvas;
    canvas.verticalGradient(palette.sky[0], palette.sky[1]);
    const cell = Math.floor((Math.min(w, h) * 0.7) / size);
    const ox = Math.floor((w - cell * size) / 2);
    const bob = Math.round(Math.sin(TAU * t * 2) * cell * 0.6);
    const oy = Math.floor((h - cell * size) / 2) + bob;
    canvas.rect(ox + cell, oy + cell * size + cell * 0.6 - bob, cell * (size - 2), cell * 0.5, [0, 0, 0], 0.25);
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        const c = sprite[y][x];
        if (c !== 0) canvas.rect(ox + x * cell, oy + y * cell, cell, cell, colors[c]);
      }
    }
  };
}
