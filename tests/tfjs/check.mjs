// TensorFlow.js (the pure-JavaScript CPU backend of @tensorflow/tfjs) against tapeflow.
//
//   node check.mjs check DIR     loads every DIR/<model>/model.json written by tapeflow's export_tfjs
//                                with tf.loadLayersModel (through TensorFlow.js's own HTTP loader, fed
//                                from the file system), predicts DIR/<model>/expected.json's inputs
//                                and compares with tapeflow's outputs (|a - b| <= 1e-5).
//   node check.mjs make DIR      builds and saves models with TensorFlow.js's Layers API
//                                (DIR/<model>/model.json + weights.bin, as tfjs-node's file:// saver
//                                lays them out) with their predictions on fixed inputs, for tapeflow.
//   node check.mjs accuracy MODEL_DIR IMAGES.idx[.gz] LABELS.idx[.gz] [EXPECTED]
//                                test accuracy of an exported classifier over the images (pixels / 255);
//                                with EXPECTED, fails unless |accuracy - EXPECTED| <= 0.001.
// Exit status 0 when everything agrees, 1 otherwise (each mismatch is printed).
import * as tf from '@tensorflow/tfjs';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const TOLERANCE = 1e-5;

// A fetch that serves file:// paths, so tf.io.http exercises TensorFlow.js's real loader
// (model.json, then every shard of the weights manifest relative to it).
function fileFetch(url) {
  const file = decodeURIComponent(new URL(url).pathname);
  if (!fs.existsSync(file)) return Promise.resolve(new Response('missing ' + file, {status: 404}));
  return Promise.resolve(new Response(fs.readFileSync(file)));
}

async function loadModel(dir) {
  const url = 'http://localhost' + path.resolve(dir, 'model.json');
  return tf.loadLayersModel(tf.io.http(url, {fetchFunc: fileFetch}));
}

function toTensors(list) {
  return list.map((t) => tf.tensor(Float32Array.from(t.data), t.shape, 'float32'));
}

async function check(root) {
  let failures = 0;
  const names = fs.readdirSync(root).filter((n) => fs.existsSync(path.join(root, n, 'model.json'))).sort();
  if (names.length === 0) throw new Error(`no exported models in ${root}`);
  for (const name of names) {
    const dir = path.join(root, name);
    const expected = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'));
    let model;
    try {
      model = await loadModel(dir);
    } catch (e) {
      console.log(`FAIL ${name}: tf.loadLayersModel refused the export: ${e.message}`);
      failures++;
      continue;
    }
    const inputs = toTensors(expected.inputs);
    let outputs = model.predict(inputs.length === 1 ? inputs[0] : inputs);
    if (!Array.isArray(outputs)) outputs = [outputs];
    let worst = 0;
    for (let k = 0; k < expected.outputs.length; k++) {
      const want = expected.outputs[k];
      const got = outputs[k].dataSync();
      if (JSON.stringify(outputs[k].shape) !== JSON.stringify(want.shape)) {
        console.log(`FAIL ${name}: output ${k} shape ${JSON.stringify(outputs[k].shape)}, tapeflow ${JSON.stringify(want.shape)}`);
        failures++;
        worst = Infinity;
        continue;
      }
      for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want.data[i]));
    }
    const layers = model.layers.map((l) => l.getClassName());
    if (!(worst <= TOLERANCE)) {
      console.log(`FAIL ${name}: max |tfjs - tapeflow| = ${worst} > ${TOLERANCE}`);
      failures++;
    } else {
      console.log(`ok   ${name}: max |tfjs - tapeflow| = ${worst.toExponential(2)} (${layers.join(', ')})`);
    }
  }
  return failures;
}

function inputsFor(shapes, seed) {
  // A fixed pseudo-random sequence (no dependence on TensorFlow.js's RNG).
  let s = seed >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296) * 2 - 1;
  return shapes.map((shape) => {
    const n = shape.reduce((a, b) => a * b, 1);
    return {shape, data: Array.from({length: n}, next)};
  });
}

async function saveModel(model, dir, inputs) {
  fs.mkdirSync(dir, {recursive: true});
  await model.save(tf.io.withSaveHandler(async (artifacts) => {
    fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.from(artifacts.weightData));
    const modelJson = {
      modelTopology: artifacts.modelTopology,
      format: artifacts.format,
      generatedBy: artifacts.generatedBy,
      convertedBy: artifacts.convertedBy,
      weightsManifest: [{paths: ['weights.bin'], weights: artifacts.weightSpecs}],
    };
    fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(modelJson));
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
  const xs = toTensors(inputs);
  let ys = model.predict(xs.length === 1 ? xs[0] : xs);
  if (!Array.isArray(ys)) ys = [ys];
  const outputs = ys.map((y) => ({shape: y.shape, data: Array.from(y.dataSync())}));
  fs.writeFileSync(path.join(dir, 'expected.json'), JSON.stringify({inputs, outputs}));
}

async function make(root) {
  // An MLP with BatchNormalization (moving statistics moved away from 0 / 1 by a little training).
  const mlp = tf.sequential();
  mlp.add(tf.layers.dense({inputShape: [6], units: 8, activation: 'relu'}));
  mlp.add(tf.layers.batchNormalization({momentum: 0.5}));
  mlp.add(tf.layers.dropout({rate: 0.2}));
  mlp.add(tf.layers.dense({units: 3, activation: 'softmax', kernelRegularizer: tf.regularizers.l2({l2: 0.01})}));
  mlp.compile({optimizer: 'adam', loss: 'sparseCategoricalCrossentropy'});
  const x = tf.tensor(inputsFor([[32, 6]], 7)[0].data, [32, 6]);
  const y = tf.tensor(Array.from({length: 32}, (_, i) => i % 3), [32]);
  await mlp.fit(x, y, {epochs: 2, batchSize: 8, verbose: 0});
  await saveModel(mlp, path.join(root, 'tfjs_mlp'), inputsFor([[5, 6]], 1));

  // A functional model: two inputs, a skip connection, every merge layer, LeakyReLU, reshape.
  const a = tf.input({shape: [4]});
  const b = tf.input({shape: [4]});
  const h = tf.layers.dense({units: 4, activation: 'tanh', kernelInitializer: 'heNormal'}).apply(a);
  const sum = tf.layers.add().apply([a, h]);
  const prod = tf.layers.multiply().apply([sum, b]);
  const avg = tf.layers.average().apply([prod, b]);
  const cat = tf.layers.concatenate().apply([avg, tf.layers.leakyReLU({alpha: 0.2}).apply(b)]);
  const r = tf.layers.flatten().apply(tf.layers.reshape({targetShape: [2, 4]}).apply(cat));
  const out = tf.layers.dense({units: 2, activation: 'sigmoid'}).apply(tf.layers.activation({activation: 'relu'}).apply(r));
  const functional = tf.model({inputs: [a, b], outputs: out});
  await saveModel(functional, path.join(root, 'tfjs_functional'), inputsFor([[3, 4], [3, 4]], 2));
  return 0;
}

function readIdx(file) {
  let buf = fs.readFileSync(file);
  if (file.endsWith('.gz')) buf = zlib.gunzipSync(buf);
  const rank = buf[3];
  const dims = [];
  for (let i = 0; i < rank; i++) dims.push(buf.readUInt32BE(4 + 4 * i));
  return {dims, data: buf.subarray(4 + 4 * rank)};
}

async function accuracy(modelDir, imagesFile, labelsFile, expected) {
  const model = await loadModel(modelDir);
  const images = readIdx(imagesFile), labels = readIdx(labelsFile);
  const n = images.dims[0], pixels = images.dims.slice(1).reduce((p, d) => p * d, 1);
  const inputShape = model.inputs[0].shape.slice(1);
  let correct = 0;
  for (let start = 0; start < n; start += 1000) {
    const m = Math.min(1000, n - start);
    const x = new Float32Array(m * pixels);
    for (let i = 0; i < m * pixels; i++) x[i] = images.data[start * pixels + i] / 255;
    const logits = model.predict(tf.tensor(x, [m, ...inputShape]));
    const predicted = logits.argMax(-1).dataSync();
    for (let i = 0; i < m; i++) correct += predicted[i] === labels.data[start + i] ? 1 : 0;
    tf.dispose(logits);
  }
  const acc = correct / n;
  console.log(`tfjs test accuracy: ${acc.toFixed(4)} (${correct} / ${n})`);
  if (expected !== undefined && !(Math.abs(acc - Number(expected)) <= 0.001)) {
    console.log(`FAIL: tapeflow reported ${expected}`);
    return 1;
  }
  return 0;
}

const [cmd, ...args] = process.argv.slice(2);
await tf.setBackend('cpu');
let status;
if (cmd === 'check') status = await check(args[0]);
else if (cmd === 'make') status = await make(args[0]);
else if (cmd === 'accuracy') status = await accuracy(...args);
else {
  console.error('usage: node check.mjs check DIR | make DIR | accuracy MODEL_DIR IMAGES LABELS [EXPECTED]');
  status = 2;
}
process.exit(status === 0 ? 0 : 1);
