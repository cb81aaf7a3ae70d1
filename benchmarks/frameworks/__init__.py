"""Investigations of one framework's operators or idioms, the figures behind docs/fairness.md and
docs/frameworks/: jax_depthwise, jax_init_cost, mxnet_relu6, mxnet_relu_activation (run with that
framework's interpreter), tf_graph_outputs and modes_first_steps (re-run themselves in the
framework's environment), arrange_cost (a PyTorch interpreter), and zoo_parity with its pairs in
zoo_models (bench's ports against the frameworks' model zoos, through inside/zoo_<fw>).
"""
