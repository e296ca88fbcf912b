import { selectBackend, PolicyModel, tf, maskedNll } from "/work/main/packages/trainer-gpu/src/index.ts";
await selectBackend({ log: () => {} });
for (const [B, T, d] of [[32, 64, 64], [16, 64, 256]]) {
  const m = PolicyModel.create({ vocabSize: 108, dModel: d, nLayers: 2, nHeads: 4, contextLength: 128, seed: 1 });
  const ids = Array.from({ length: B }, (_, b) => Array.from({ length: T }, (_, t) => (b * 7 + t * 3) % 108));
  const mask = ids.map((r) => r.map(() => 1));
  const opt = tf.train.adam(1e-3);
  let best = 1e9;
  for (let i = 0; i < 8; i++) { const t0 = performance.now(); const l = opt.minimize(() => maskedNll(m, ids, mask), true, m.trainableVariables); l!.dataSync(); l!.dispose(); if (i > 1) best = Math.min(best, performance.now() - t0); }
  console.log(`B${B} T${T} d${d}: best ${best.toFixed(1)} ms/step, ${(B * T / best * 1000).toFixed(0)} tok/s`);
  m.dispose();
}
