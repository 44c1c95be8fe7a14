"""Training objectives: each an ``nn.Module`` over a :class:`SentenceEncoder` returning a scalar loss."""

from __future__ import annotations

from .base import Batch, Objective, make_batch
from .contrastive import OnlineContrastiveLoss
from .ranking import MultipleNegativesRankingLoss
from .similarity import CoSENTLoss, CosineSimilarityLoss
from .softmax import HEAD_FOLDER, SoftmaxLoss
from .triplet import DISTANCES, TripletLoss

__all__ = [
    "DISTANCES",
    "HEAD_FOLDER",
    "Batch",
    "CoSENTLoss",
    "CosineSimilarityLoss",
    "MultipleNegativesRankingLoss",
    "Objective",
    "OnlineContrastiveLoss",
    "SoftmaxLoss",
    "TripletLoss",
    "make_batch",
]
