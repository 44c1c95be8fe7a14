"""Training objectives: each an ``nn.Module`` over a :class:`SentenceEncoder` or :class:`CrossEncoder` returning a
scalar loss."""

from __future__ import annotations

from ...types import TRIPLET_DISTANCES as DISTANCES
from .base import Batch, Objective, SentenceObjective, make_batch
from .contrastive import OnlineContrastiveLoss
from .cross import CrossEncoderBCELoss, CrossEncoderListwiseLoss, CrossEncoderMSELoss, CrossEncoderObjective
from .late import MaxSimRankingLoss
from .matryoshka import MatryoshkaLoss
from .ranking import MultipleNegativesRankingLoss
from .similarity import CoSENTLoss, CosineSimilarityLoss
from .softmax import HEAD_FOLDER, SoftmaxLoss
from .triplet import TripletLoss

__all__ = [
    "DISTANCES",
    "HEAD_FOLDER",
    "Batch",
    "CoSENTLoss",
    "CosineSimilarityLoss",
    "CrossEncoderBCELoss",
    "CrossEncoderListwiseLoss",
    "CrossEncoderMSELoss",
    "CrossEncoderObjective",
    "MatryoshkaLoss",
    "MaxSimRankingLoss",
    "MultipleNegativesRankingLoss",
    "Objective",
    "OnlineContrastiveLoss",
    "SentenceObjective",
    "SoftmaxLoss",
    "TripletLoss",
    "make_batch",
]
