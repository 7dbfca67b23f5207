import type { ModelDefinition } from '@genservice/core';
import { encodeGlb, type GlbMaterial, type Mesh } from '../formats/glb.js';
import { Pacer } from '../util/abort.js';
import { paletteFor, type Rgb } from '../util/raster.js';
import { canonicalSettings, seededRandom, type Random } from '../util/random.js';
import { budgetMs, selectSetting, textSetting, type DemoModel } from './types.js';

export const SHAPES = ['blob', 'sphere', 'cube', 'torus', 'cone'] as const;
export const FINISHES = ['matte', 'glossy', 'metallic'] as const;
type Shape = (typeof SHAPES)[number];
type Vec3 = [number, number, number];

const FINISH: Record<(typeof FINISHES)[number], { metallic: number; roughness: number }> = {
  matte: { metallic: 0, roughness: 0.9 },
  glossy: { metallic: 0, roughness: 0.2 },
  metallic: { metallic: 1, roughness: 0.3 },
};

/** glTF vertex colours are linear; the palette is sRGB. */
function linear(c: Rgb): Vec3 {
  return c.map((v) => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  }) as unknown as Vec3;
}

function normalize(v: Vec3): Vec3 {
  const length = Math.hypot(v[0], v[1], v[2]);
  return length < 1e-12 ? [0, 1, 0] : [v[0] / length, v[1] / length, v[2] / length];
}

function cross(a: Vec3, b: Vec3): Vec3 {
  return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
}

class MeshBuilder {
  private readonly positions: number[] = [];
  private readonly normals: number[] = [];
  private readonly colors: number[] = [];
  private readonly indices: number[] = [];

  vertex(position: Vec3, normal: Vec3, color: Vec3): number {
    this.positions.push(...position);
    this.normals.push(...normalize(normal));
    this.colors.push(...color);
    return this.positions.length / 3 - 1;
  }

  triangle(a: number, b: number, c: number): void {
    this.indices.push(a, b, c);
  }

  build(): Mesh {
    const count = this.positions.length / 3;
    return {
      positions: Float32Array.from(this.positions),
      normals: Float32Array.from(this.normals),
      colors: Float32Array.from(this.colors),
      indices: count > 65535 ? Uint32Array.from(this.indices) : Uint16Array.from(this.indices),
    };
  }
}

/**
 * A (u, v) grid over a parametric surface, u around and v from bottom to top, wound counter-clockwise seen from
 * outside. Normals come from the surface derivatives, so the seam where u wraps is shaded smoothly too.
 */
function parametric(builder: MeshBuilder, surface: (u: number, v: number) => Vec3, segmentsU: number, segmentsV: number, color: (p: Vec3) => Vec3, fallbackNormal: (p: Vec3) => Vec3, poles = false): void {
  const e = 1e-4;
  const base: number[][] = [];
  for (let j = 0; j <= segmentsV; j++) {
    const row: number[] = [];
    for (let i = 0; i <= segmentsU; i++) {
      const u = i / segmentsU;
      const v = j / segmentsV;
      const p = surface(u, v);
      const du = surface(u + e, v).map((x, k) => x - surface(u - e, v)[k]) as Vec3;
      const dv = surface(u, Math.min(1, v + e)).map((x, k) => x - surface(u, Math.max(0, v - e))[k]) as Vec3;
      let n = cross(du, dv);
      if (Math.hypot(...n) < 1e-10) n = fallbackNormal(p);
      row.push(builder.vertex(p, n, color(p)));
    }
    base.push(row);
  }
  for (let j = 0; j < segmentsV; j++) {
    for (let i = 0; i < segmentsU; i++) {
      const a = base[j][i];
      const b = base[j][i + 1];
      const c = base[j + 1][i + 1];
      const d = base[j + 1][i];
      // At a pole one edge of the quad collapses to a point; skip the zero-area triangle there.
      if (!(poles && j === 0)) builder.triangle(a, b, c);
      if (!(poles && j === segmentsV - 1)) builder.triangle(a, c, d);
    }
  }
}

function buildShape(shape: Shape, random: Random, gradient: (t: number) => Vec3): Mesh {
  const builder = new MeshBuilder();
  const byHeight = (p: Vec3): Vec3 => gradient((p[1] + 1) / 2);
  const sphere = (radius: (u: number, v: number) => number) => (u: number, v: number): Vec3 => {
    const theta = u * Math.PI * 2;
    const phi = v * Math.PI; // 0 at the bottom pole
    const r = radius(u, v);
    return [r * Math.sin(phi) * Math.cos(theta), -r * Math.cos(phi), -r * Math.sin(phi) * Math.sin(theta)];
  };
  switch (shape) {
    case 'sphere':
      parametric(builder, sphere(() => 1), 48, 32, byHeight, (p) => p, true);
      break;
    case 'blob': {
      // A sphere pushed in and out by a few seeded harmonics: the prompt decides the form, not only the colour.
      const waves = Array.from({ length: 4 }, () => ({ m: random.int(1, 5), n: random.int(1, 4), amp: random.range(0.04, 0.14), phase: random.range(0, Math.PI * 2) }));
      const radius = (u: number, v: number): number =>
        0.85 + waves.reduce((sum, w) => sum + w.amp * Math.sin(w.m * u * Math.PI * 2 + w.phase) * Math.sin(w.n * v * Math.PI) ** 2, 0);
      parametric(builder, sphere(radius), 64, 40, byHeight, (p) => p, true);
      break;
    }
    case 'torus': {
      const major = 0.7;
      const minor = random.range(0.2, 0.32);
      parametric(
        builder,
        (u, v) => {
          const theta = u * Math.PI * 2;
          const phi = v * Math.PI * 2;
          const ring = major + minor * Math.cos(phi);
          return [ring * Math.cos(theta), minor * Math.sin(phi), -ring * Math.sin(theta)];
        },
        64,
        24,
        (p) => gradient((p[1] / minor + 1) / 2),
        (p) => p,
      );
      break;
    }
    case 'cube': {
      // Flat faces need their own vertices, so each face gets four with the face normal.
      const faces: Array<{ n: Vec3; u: Vec3; v: Vec3 }> = [
        { n: [1, 0, 0], u: [0, 0, -1], v: [0, 1, 0] },
        { n: [-1, 0, 0], u: [0, 0, 1], v: [0, 1, 0] },
        { n: [0, 1, 0], u: [1, 0, 0], v: [0, 0, -1] },
        { n: [0, -1, 0], u: [1, 0, 0], v: [0, 0, 1] },
        { n: [0, 0, 1], u: [1, 0, 0], v: [0, 1, 0] },
        { n: [0, 0, -1], u: [-1, 0, 0], v: [0, 1, 0] },
      ];
      const s = 0.8;
      for (const { n, u, v } of faces) {
        const corner = (a: number, b: number): number => {
          const p: Vec3 = [0, 1, 2].map((k) => s * (n[k] + a * u[k] + b * v[k])) as Vec3;
          return builder.vertex(p, n, byHeight([p[0], p[1] / s, p[2]]));
        };
        const c0 = corner(-1, -1);
        const c1 = corner(1, -1);
        const c2 = corner(1, 1);
        const c3 = corner(-1, 1);
        builder.triangle(c0, c1, c2);
        builder.triangle(c0, c2, c3);
      }
      break;
    }
    case 'cone': {
      const segments = 48;
      const height = random.range(1.6, 2);
      const radius = random.range(0.6, 0.9);
      const slope = radius / height;
      const apex: Vec3 = [0, height / 2, 0];
      for (let i = 0; i < segments; i++) {
        const a0 = (i / segments) * Math.PI * 2;
        const a1 = ((i + 1) / segments) * Math.PI * 2;
        const ring = (a: number): Vec3 => [radius * Math.cos(a), -height / 2, -radius * Math.sin(a)];
        const normal = (a: number): Vec3 => [Math.cos(a), slope, -Math.sin(a)];
        const p0 = builder.vertex(ring(a0), normal(a0), gradient(0));
        const p1 = builder.vertex(ring(a1), normal(a1), gradient(0));
        const top = builder.vertex(apex, normal((a0 + a1) / 2), gradient(1));
        builder.triangle(p0, p1, top);
        const b0 = builder.vertex(ring(a0), [0, -1, 0], gradient(0));
        const b1 = builder.vertex(ring(a1), [0, -1, 0], gradient(0));
        const centre = builder.vertex([0, -height / 2, 0], [0, -1, 0], gradient(0));
        builder.triangle(b1, b0, centre);
      }
      break;
    }
  }
  return builder.build();
}

const definition: ModelDefinition = {
  modelId: 'demo-3d',
  title: 'Demo 3D model (glTF binary, GLB)',
  resultType: '3d',
  estimatedGenerationTime: 3,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'shape', title: 'Shape', fieldType: 'select', options: [...SHAPES] },
    { name: 'finish', title: 'Finish', fieldType: 'select', options: [...FINISHES] },
  ],
  price: 8,
  timeoutMs: 30_000,
};

export const meshModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const shape = selectSetting(settings, 'shape', SHAPES);
    const finish = selectSetting(settings, 'finish', FINISHES);
    const random = seededRandom(definition.modelId, canonicalSettings({ prompt, shape, finish }));
    const palette = paletteFor(prompt, random);
    const bottom = linear(palette.colors[0]);
    const top = linear(palette.colors[1]);
    const gradient = (t: number): Vec3 => {
      const c = Math.min(1, Math.max(0, t));
      return [bottom[0] + (top[0] - bottom[0]) * c, bottom[1] + (top[1] - bottom[1]) * c, bottom[2] + (top[2] - bottom[2]) * c];
    };
    const mesh = buildShape(shape, random, gradient);
    await pacer.reach(0.5);
    const material: GlbMaterial = { name: `${finish} ${shape}`, baseColor: [1, 1, 1, 1], ...FINISH[finish] };
    const bytes = encodeGlb(mesh, material, prompt.slice(0, 120));
    await pacer.reach(1);
    return { bytes, mimeType: 'model/gltf-binary' };
  },
};
