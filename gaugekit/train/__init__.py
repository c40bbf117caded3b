"""The trainers: one for factor runs, one for twins.

``factors``   the stacked trainer of every factor experiment: many runs of ``W = U Vᵀ`` at once;
              its stack of factors, optimizers and curves, and dropping finished runs from a
              stack (parameters and optimizer state) ``factor_stack``
``twins``     the stacked twin trainer of the attention experiments: a base and its twins
"""

# Developer note (layers, gaugekit/__init__.py): floor 7, train/, on runs/, optim/ and problems/.
