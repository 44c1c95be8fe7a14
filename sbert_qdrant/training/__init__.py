"""Fine-tuning: data readers, the SBERT and cross-encoder objectives, a trainer, evaluators, and hard negatives mined
from a collection (through its public search). Uses the encoder, never the store."""

from __future__ import annotations

from ..errors import DataFormatError
from .checkpoint import CheckpointError
from .data import (
    NLI_LABELS,
    Example,
    read_binary_pairs,
    read_examples,
    read_nli,
    read_scored_pairs,
    read_texts,
)
from .evaluation import Evaluator, PairClassificationEvaluator, RetrievalEvaluator, STSEvaluator
from .hard_negatives import MinedNegatives, MiningGuards, mine_hard_negatives
from .losses import (
    Batch,
    CoSENTLoss,
    CosineSimilarityLoss,
    CrossEncoderBCELoss,
    CrossEncoderListwiseLoss,
    CrossEncoderMSELoss,
    CrossEncoderObjective,
    MatryoshkaLoss,
    MaxSimRankingLoss,
    MultipleNegativesRankingLoss,
    Objective,
    OnlineContrastiveLoss,
    SentenceObjective,
    SoftmaxLoss,
    TripletLoss,
    make_batch,
)
from .stage_guard import STAGE_MARGIN, StageCheck, check_stage, split_labelled
from .trainer import Trainer, TrainingConfig, TrainingResult, warmup_linear

__all__ = [
    "NLI_LABELS",
    "STAGE_MARGIN",
    "Batch",
    "CheckpointError",
    "CoSENTLoss",
    "CosineSimilarityLoss",
    "CrossEncoderBCELoss",
    "CrossEncoderListwiseLoss",
    "CrossEncoderMSELoss",
    "CrossEncoderObjective",
    "DataFormatError",
    "Evaluator",
    "Example",
    "MatryoshkaLoss",
    "MaxSimRankingLoss",
    "MinedNegatives",
    "MiningGuards",
    "MultipleNegativesRankingLoss",
    "Objective",
    "OnlineContrastiveLoss",
    "PairClassificationEvaluator",
    "RetrievalEvaluator",
    "STSEvaluator",
    "SentenceObjective",
    "SoftmaxLoss",
    "StageCheck",
    "Trainer",
    "TrainingConfig",
    "TrainingResult",
    "TripletLoss",
    "check_stage",
    "make_batch",
    "mine_hard_negatives",
    "read_binary_pairs",
    "read_examples",
    "read_nli",
    "read_scored_pairs",
    "read_texts",
    "split_labelled",
    "warmup_linear",
]
