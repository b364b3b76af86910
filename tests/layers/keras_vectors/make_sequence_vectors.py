"""Makes sequence_vectors.json: Keras 3 outputs and gradients for fixed weights and inputs of the
1-D convolution, pooling and RMS normalization layers (Conv1D valid / same / causal with strides
and dilation, MaxPooling1D, AveragePooling1D, RMSNormalization), in float64, read by
tests/layers/keras_vectors_test.cc. Cases as keras_case.py describes. Keras 3's float32 detours show
in float64 models: its tanh (convert_to_tensor to floatx) and ops.rms_normalization
(result_type(float64, "float32") is float32 in Keras's promotion) round to float32, so the RMS cases
carry ~1e-7 relative error and the convolutions use linear and relu activations (exact).

  KERAS_BACKEND=jax /work/venv/bin/python tests/layers/keras_vectors/make_sequence_vectors.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_case import Cases, keras  # noqa: E402

CONFIG_KEYS = {"filters", "kernel_size", "strides", "padding", "dilation_rate", "activation", "use_bias",
               "pool_size", "axis", "epsilon"}
F = "float64"
C = Cases(20261203, CONFIG_KEYS)
rand, case = C.rand, C.case
cases = []

x = rand(2, 9, 3)
cases.append(case("conv1d_valid", keras.layers.Conv1D(4, 3, dtype=F), [x], [0]))
cases.append(case("conv1d_same_strides_2", keras.layers.Conv1D(4, 4, strides=2, padding="same", dtype=F), [x], [0]))
cases.append(case("conv1d_causal_dilation_2", keras.layers.Conv1D(2, 3, padding="causal", dilation_rate=2, dtype=F),
                  [x], [0]))
cases.append(case("conv1d_valid_dilation_3_no_bias",
                  keras.layers.Conv1D(5, 2, dilation_rate=3, use_bias=False, activation="relu", dtype=F), [x], [0]))
cases.append(case("conv1d_causal_strides_3", keras.layers.Conv1D(3, 2, strides=3, padding="causal", dtype=F),
                  [x], [0]))
y = rand(2, 7, 3)
cases.append(case("max_pooling_1d_valid", keras.layers.MaxPooling1D(3, strides=2, dtype=F), [y], [0]))
cases.append(case("max_pooling_1d_same", keras.layers.MaxPooling1D(2, padding="same", dtype=F), [y], [0]))
cases.append(case("average_pooling_1d_valid", keras.layers.AveragePooling1D(2, dtype=F), [y], [0]))
cases.append(case("average_pooling_1d_same", keras.layers.AveragePooling1D(3, strides=2, padding="same", dtype=F),
                  [y], [0]))
cases.append(case("rms_norm_last_axis", keras.layers.RMSNormalization(dtype=F), [rand(2, 3, 4, lo=-2, hi=3)], [0]))
cases.append(case("rms_norm_axes_1_2", keras.layers.RMSNormalization(axis=[1, 2], epsilon=1e-3, dtype=F),
                  [rand(2, 3, 4)], [0]))

Cases.write(cases, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequence_vectors.json"))
